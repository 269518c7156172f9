// The reader of [[rules]] entries, and the share of [store] max_keys each
// rule gets. Used by LoadConfig*(); reports into the ErrorList.
#pragma once

#include <vector>

#include "rules/config_reader.h"
#include "rules/rule.h"

namespace tollgate::rules {

// Reads one [[rules]] entry; [store] must be read before (a rule's
// max_keys is a part of [store] max_keys).
void ReadRule(TableReader r, const StoreConfig& store, std::size_t prices,
              std::vector<RuleConfig>& out);
// Once every rule is read: each rule of the local store that has no
// max_keys of its own gets an even share of what the others leave of
// [store] max_keys.
void ShareStoreKeys(const StoreConfig& store, std::vector<RuleConfig>& rules);

}  // namespace tollgate::rules
