// Readers for the rate-limiting sections of the configuration: [[rules]],
// [identity] and [store]. Used by LoadConfig*(); report into the ErrorList.
#pragma once

#include <vector>

#include "rules/config_reader.h"
#include "rules/rule.h"

namespace tollgate::rules {

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
