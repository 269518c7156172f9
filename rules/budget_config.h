// Reads and checks the budget keys of a rate rule and the [[prices]]
// entries (rules/budget.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/limit.h"
#include "rules/budget.h"
#include "rules/config_reader.h"
#include "rules/rule.h"

namespace tollgate::rules {

// Why `path` is not a JSON path of the form gateway/budget/json_fields.h
// reads (dotted keys and decimal indices), or empty when it is one.
std::string JsonPathProblem(std::string_view path);

// A rate rule's budget keys into rule.budget; the integer `cost` and
// `cost_default` into rule.cost. `algorithm`: the rule's (not checked when
// it could not be read); `prices`: how many [[prices]] entries the file
// has.
void ReadRuleBudget(TableReader& r, std::optional<algorithms::Algorithm> algorithm,
                    std::size_t prices, RuleConfig& rule);
// One [[prices]] entry into `out`.
void ReadPrice(TableReader r, std::vector<ModelPrice>& out);

}  // namespace tollgate::rules
