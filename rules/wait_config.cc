#include "rules/wait_config.h"

#include <fmt/format.h>

#include "rules/key_config.h"
#include "rules/rule_set.h"

namespace tollgate::rules {

Priority PriorityNamed(std::string_view name) {
  return name == "high" ? Priority::kHigh : name == "low" ? Priority::kLow : Priority::kNormal;
}

void ReadRuleWaits(TableReader& r, RuleConfig& rule) {
  ErrorList& errors = r.errors();
  if (auto p = r.OneOf("priority")) {
    rule.priority = PriorityNamed(*p);
    if (rule.per == LimitUnit::kMessage) {
      errors.Add(*r.Find("priority"),
                 "\"priority\" has no meaning with per = \"message\": a held message waits in "
                 "its own tunnel");
    }
  }
  const bool waits = (rule.action == RuleAction::kDelay && rule.per == LimitUnit::kRequest &&
                      rule.max_inflight == 0) ||
                     (rule.max_inflight > 0 && rule.max_delay_ms > 0);
  for (const char* key : {"fair_key", "max_waiting_per_flow"}) {
    if (const toml::value* v = r.Find(key); v != nullptr && !waits) {
      errors.Add(*v, fmt::format("\"{}\" needs a wait: action = \"delay\", or max_inflight "
                                 "with max_delay",
                                 key));
    }
  }
  if (auto n = r.Integer("max_waiting_per_flow")) rule.max_waiting_per_flow = *n;
  const toml::value* fair = r.Find("fair_key");
  if (fair == nullptr) return;
  auto parts = ReadKey(*fair, "fair_key", errors);
  if (!parts) return;
  for (const KeyPart& part : *parts) {
    // A request's flow is known before its body is read, and RLS calls
    // never wait.
    if (part.kind == KeyPartKind::kJson || part.kind == KeyPartKind::kDescriptor) {
      errors.Add(*fair, fmt::format("\"fair_key\" part \"{}\" is not known while a request "
                                    "waits: use ip, user, role, global, route or header:NAME",
                                    KeyPartName(part)));
      return;
    }
  }
  rule.fair_key = std::move(*parts);
}

void ReadWeights(TableReader& r, LimitsConfig& limits) {
  auto table = r.IntegerTable("weight");
  if (!table) return;
  limits.weight.clear();
  for (auto& [role, weight] : *table) {
    limits.weight.emplace_back(std::move(role), static_cast<std::uint32_t>(weight));
  }
}

}  // namespace tollgate::rules
