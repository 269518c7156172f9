#include "gateway/core/request_cost.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "gateway/budget/json_fields.h"
#include "gateway/budget/llm_request.h"

namespace tollgate::gateway {
namespace {

bool IsPreset(rules::CostKind kind) {
  return kind == rules::CostKind::kOpenAi || kind == rules::CostKind::kAnthropic;
}

budget::LlmApi ApiOf(rules::CostKind kind) {
  return kind == rules::CostKind::kAnthropic ? budget::LlmApi::kAnthropic : budget::LlmApi::kOpenAi;
}

budget::Reserve ReserveOf(rules::Reserve reserve) {
  return reserve == rules::Reserve::kEstimate ? budget::Reserve::kEstimate
                                              : budget::Reserve::kUpperBound;
}

// An LLM preset rule's reservation for `request`, its output bound given.
std::int64_t PresetCost(const rules::RuleConfig& rule, const budget::LlmRequest& request,
                        std::int64_t output_bound, const std::vector<rules::ModelPrice>& prices) {
  const budget::Reserve reserve = ReserveOf(rule.budget.reserve);
  switch (rule.budget.tokens) {
    case rules::TokenCount::kInput:
      return budget::ReservedTokens(request, output_bound, budget::TokenCount::kInput, reserve);
    case rules::TokenCount::kOutput:
      return budget::ReservedTokens(request, output_bound, budget::TokenCount::kOutput, reserve);
    case rules::TokenCount::kTotal:
      return budget::ReservedTokens(request, output_bound, budget::TokenCount::kTotal, reserve);
    case rules::TokenCount::kPrice:
      break;
  }
  const rules::ModelPrice* price = PriceOf(prices, request.model);
  // A model without a price costs what the rule says a request costs.
  if (price == nullptr) return rule.cost;
  return PricedCost(
      *price, budget::ReservedTokens(request, output_bound, budget::TokenCount::kInput, reserve),
      output_bound);
}

}  // namespace

const rules::ModelPrice* PriceOf(const std::vector<rules::ModelPrice>& prices,
                                 std::string_view model) {
  for (const rules::ModelPrice& price : prices) {
    const std::string_view pattern = price.model;
    if (!pattern.empty() && pattern.back() == '*') {
      if (model.starts_with(pattern.substr(0, pattern.size() - 1))) return &price;
    } else if (model == pattern) {
      return &price;
    }
  }
  return nullptr;
}

std::int64_t PricedCost(const rules::ModelPrice& price, std::int64_t input, std::int64_t output) {
  const double units = (static_cast<double>(input) * price.input +
                        static_cast<double>(output) * price.output) /
                       static_cast<double>(price.unit_tokens);
  // Bounded: a cost beyond any limit's capacity is refused as such.
  constexpr double kMax = static_cast<double>(std::numeric_limits<std::int64_t>::max() / 2);
  return static_cast<std::int64_t>(std::ceil(std::min(std::max(units, 0.0), kMax)));
}

void CostsFromBody(std::span<rules::RuleHit> hits, std::string_view body,
                   const std::vector<rules::ModelPrice>& prices, BodyCosts& out) {
  out.rewritten.reset();
  out.model.clear();
  std::optional<budget::LlmRequest> llm;
  bool llm_read = false;
  // The output bound written into the request when it sets none: the
  // smallest of the preset rules' (each reserves by what the model may
  // really spend); and which API's shape the body has.
  std::int64_t rule_bound = 0;
  std::optional<budget::LlmApi> api;
  for (rules::RuleHit& hit : hits) {
    const rules::RuleConfig& rule = *hit.rule;
    if (!IsPreset(rule.budget.cost)) continue;
    if (!llm_read) {
      llm = budget::ReadLlmRequest(body);
      llm_read = true;
    }
    if (rule_bound == 0 || rule.budget.max_output_tokens < rule_bound) {
      rule_bound = rule.budget.max_output_tokens;
    }
    if (!api || ApiOf(rule.budget.cost) == budget::LlmApi::kOpenAi) api = ApiOf(rule.budget.cost);
  }
  if (llm) {
    out.model = llm->model;
    out.rewritten = budget::RewriteLlmRequest(body, *api, *llm, rule_bound);
  }
  for (rules::RuleHit& hit : hits) {
    const rules::RuleConfig& rule = *hit.rule;
    switch (rule.budget.cost) {
      case rules::CostKind::kFixed:
      case rules::CostKind::kHeader:
        break;
      case rules::CostKind::kJson:
        hit.cost = budget::NumberAt(body, rule.budget.cost_json).value_or(rule.cost);
        break;
      case rules::CostKind::kRequestBytes:
        hit.cost = static_cast<std::int64_t>(body.size());
        break;
      case rules::CostKind::kOpenAi:
      case rules::CostKind::kAnthropic:
        if (!llm) {
          hit.cost = rule.cost;  // not a JSON object: the upstream refuses it
          break;
        }
        // Without a bound of its own, the request is bounded by the one
        // written into it (OpenAI); an Anthropic request must carry one.
        hit.cost = PresetCost(rule, *llm, llm->output_bound.value_or(rule_bound), prices);
        break;
    }
  }
}

}  // namespace tollgate::gateway
