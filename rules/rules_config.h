// The reader of [[rules]] entries, and the share of [store] max_keys each
// rule gets. Used by LoadConfig*(); reports into the ErrorList.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "rules/config_reader.h"
#include "rules/rule.h"

namespace tollgate::rules {

// A rule's key (or fair_key, as `name` says): its parts, json:PATH ones
// last; nullopt when wrong (reported at `v`).
std::optional<std::vector<KeyPart>> ReadKey(const toml::value& v, std::string_view name,
                                            ErrorList& errors);

// Reads one [[rules]] entry; [store] must be read before (a rule's
// max_keys is a part of [store] max_keys).
void ReadRule(TableReader r, const StoreConfig& store, std::size_t prices,
              std::vector<RuleConfig>& out);
// Once every rule is read: each rule of the local store that has no
// max_keys of its own gets an even share of what the others leave of
// [store] max_keys.
void ShareStoreKeys(const StoreConfig& store, std::vector<RuleConfig>& rules);

}  // namespace tollgate::rules
