// The command line's help: the overview (`tollgate --help`) and each
// subcommand's own (`tollgate help replay`, `tollgate replay --help`).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tollgate::gateway {

// Every subcommand's synopsis, the signals, and how to get more.
std::string OverviewHelp();

// SUBCOMMAND's help (replay, import, echo-upstream, schema, ctl); nullopt for a
// name that is not a subcommand.
std::optional<std::string> SubcommandHelp(std::string_view subcommand);

// The one line of a usage error: "tollgate[ SUBCOMMAND]: PROBLEM; see
// 'tollgate[ SUBCOMMAND] --help'". `subcommand` empty: the program's.
std::string UsageLine(std::string_view subcommand, std::string_view problem);

}  // namespace tollgate::gateway
