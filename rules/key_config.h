// The reader of a rule's key parts (`key`, `fair_key`): "ip", "user",
// "role", "global", "route", "header:NAME", "json:PATH", "descriptor".
// Used by ReadRule and ReadRuleWaits; reports into the ErrorList.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "rules/config_reader.h"
#include "rules/rule.h"

namespace tollgate::rules {

// `v`'s parts (a string or an array of them), json:PATH ones last; nullopt
// when wrong (reported at `v`, naming the key `name`).
std::optional<std::vector<KeyPart>> ReadKey(const toml::value& v, std::string_view name,
                                            ErrorList& errors);

}  // namespace tollgate::rules
