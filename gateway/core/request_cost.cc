#include "gateway/core/request_cost.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "gateway/budget/json_fields.h"
#include "gateway/budget/llm_request.h"

namespace tollgate::gateway {
namespace {

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
  // A model without a price costs the rule's fixed cost (1 with a preset).
  if (price == nullptr) return rule.cost;
  return PricedCost(
      *price, budget::ReservedTokens(request, output_bound, budget::TokenCount::kInput, reserve),
      output_bound);
}

// The JSON body's values at the paths of the json:PATH key parts, by path:
// a string as it is, a number in decimal.
class BodyFields final : public rules::HeaderLookup {
 public:
  BodyFields(std::vector<std::string> paths, std::string_view body)
      : paths_(std::move(paths)), fields_(paths_) {
    fields_.Feed(body);
    whole_ = fields_.Finish();
  }
  std::string_view Get(std::string_view path) const override {
    if (!whole_) return {};
    const auto it = std::find(paths_.begin(), paths_.end(), path);
    if (it == paths_.end()) return {};
    const auto i = static_cast<std::size_t>(it - paths_.begin());
    if (const std::optional<std::string_view> s = fields_.String(i)) return *s;
    if (const std::optional<std::int64_t> n = fields_.Number(i)) {
      number_ = std::to_string(*n);
      return number_;
    }
    return {};
  }
  std::string GetJoined(std::string_view path) const override { return std::string(Get(path)); }

 private:
  std::vector<std::string> paths_;
  budget::JsonFields fields_;
  bool whole_ = false;
  mutable std::string number_;
};

// Appends the json:PATH parts to the keys of the hits that lack them.
void CompleteKeys(std::span<rules::RuleHit> hits, std::string_view body) {
  std::vector<std::string> paths;
  for (const rules::RuleHit& hit : hits) {
    if (!hit.body_key) continue;
    for (const rules::KeyPart& part : hit.rule->key) {
      if (part.kind == rules::KeyPartKind::kJson &&
          std::find(paths.begin(), paths.end(), part.header) == paths.end()) {
        paths.push_back(part.header);
      }
    }
  }
  if (paths.empty()) return;
  const BodyFields fields(std::move(paths), body);
  for (rules::RuleHit& hit : hits) {
    if (!hit.body_key) continue;
    hit.body_key = false;
    if (!rules::AppendBodyKey(*hit.rule, fields, hit.key)) hit.key.clear();
  }
}

}  // namespace

budget::LlmApi LlmApiOf(rules::CostKind preset) {
  return preset == rules::CostKind::kAnthropic ? budget::LlmApi::kAnthropic
                                               : budget::LlmApi::kOpenAi;
}

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
  CompleteKeys(hits, body);
  // The output bound written into the request when it sets none: the
  // smallest of the preset rules' (each reserves by what the model may
  // really spend); and which API's shape the body has.
  std::int64_t rule_bound = 0;
  std::optional<budget::LlmApi> api;
  for (rules::RuleHit& hit : hits) {
    const rules::RuleConfig& rule = *hit.rule;
    if (!rule.budget.FromPreset()) continue;
    if (rule_bound == 0 || rule.budget.max_output_tokens < rule_bound) {
      rule_bound = rule.budget.max_output_tokens;
    }
    if (!api || LlmApiOf(rule.budget.cost) == budget::LlmApi::kOpenAi) {
      api = LlmApiOf(rule.budget.cost);
    }
  }
  std::optional<budget::LlmRequest> llm;
  if (api) llm = budget::ReadLlmRequest(body, *api, rule_bound, out.rewritten);
  if (llm) out.model = llm->model;
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
