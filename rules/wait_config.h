// The keys that say how requests wait their turn (gateway/core/
// waiting_room.h): a rule's fair_key, max_waiting_per_flow and priority,
// and [limits] weight. Used by ReadRule and ReadLimits; reports into the
// ErrorList.
#pragma once

#include <string_view>

#include "rules/config.h"
#include "rules/config_reader.h"
#include "rules/rule.h"

namespace tollgate::rules {

// "high", "normal" or "low" (a checked choice).
Priority PriorityNamed(std::string_view name);
// After the rule's action, max_inflight and max_delay are read.
void ReadRuleWaits(TableReader& r, RuleConfig& rule);
// [limits] weight.
void ReadWeights(TableReader& r, LimitsConfig& limits);

}  // namespace tollgate::rules
