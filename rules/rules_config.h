// Readers for the rate-limiting sections of the configuration: [[rules]],
// [identity] and [store]. Used by LoadConfig*(); report into the ErrorList.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rules/config_reader.h"
#include "rules/rule.h"

namespace tollgate::rules {

// A route's or rule's path_prefix and host are kept in the canonical form
// requests are matched in (rules/normalize.h); these say why one has none.
inline constexpr char kNotCanonicalPath[] =
    "\"path_prefix\" \"{}\" is not a valid path (a malformed escape, %00 or dot segments above "
    "the root)";
inline constexpr char kNotAHost[] = "\"host\" \"{}\" is not a valid host (an empty name or \"..\")";

// A secret named by `env_key` (an environment variable) or `file_key` (a
// file, trailing newlines dropped), whichever is present (the file when
// both are); nullopt when neither is, or on an error (reported).
std::optional<std::string> ReadSecret(TableReader& r, std::string_view env_key,
                                      std::string_view file_key);

// A CIDR or a list of CIDRs ("10.0.0.0/8", "::1/128", a bare address);
// `name` is the key, for the errors.
std::vector<Cidr> ReadCidrs(const toml::value& v, std::string_view name, ErrorList& errors);

void ReadIdentity(TableReader r, IdentityConfig& out);
void ReadStore(TableReader r, StoreConfig& out);
// Reads one [[rules]] entry; [store] must be read before (a rule's
// max_keys is a part of [store] max_keys).
void ReadRule(TableReader r, const StoreConfig& store, std::vector<RuleConfig>& out);
// Once every rule is read: each rule of the local store that has no
// max_keys of its own gets an even share of what the others leave of
// [store] max_keys.
void ShareStoreKeys(const StoreConfig& store, std::vector<RuleConfig>& rules);

}  // namespace tollgate::rules
