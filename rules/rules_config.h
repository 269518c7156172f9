// Readers for the rate-limiting sections of the configuration: [[rules]],
// [identity] and [store]. Used by LoadConfig*(); report into the ErrorList.
#pragma once

#include <vector>

#include "rules/config_reader.h"
#include "rules/rule.h"

namespace tollgate::rules {

void ReadIdentity(TableReader r, IdentityConfig& out);
void ReadStore(TableReader r, StoreConfig& out);
void ReadRule(TableReader r, std::vector<RuleConfig>& out);

}  // namespace tollgate::rules
