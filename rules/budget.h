// The budget of a rate rule (reserve from the request, settle from the
// response) and the prices of LLM models, as the configuration says them
// (rules/budget_config.h reads them). The request pipeline applies them:
// a header's cost in gateway/core/limits.h, a body's in
// gateway/core/request_cost.h, settling in gateway/core/settlement.h.
#pragma once

#include <cstdint>
#include <string>

namespace tollgate::rules {

// Where a request's cost comes from (`cost`).
enum class CostKind : std::uint8_t {
  kFixed,         // cost = N (RuleConfig::cost)
  kHeader,        // cost = { header = "X-Cost" }
  kJson,          // cost = { json = "a.b" }: a number in the JSON request body
  kRequestBytes,  // cost = "request_bytes"
  kOpenAi,        // cost = "openai": an LLM request's token bound
  kAnthropic,     // cost = "anthropic"
};

// Where the settled cost comes from (`settle`; the LLM presets settle from
// the response's usage without one).
enum class SettleKind : std::uint8_t {
  kNone,           // no settling: the reservation is the cost
  kHeader,         // settle = { header = "X-Usage" }
  kJson,           // settle = { json = "usage.total_tokens" }, JSON or SSE data
  kResponseBytes,  // settle = "response_bytes"
  kUsage,          // an LLM preset's usage
};

// Which tokens an LLM preset counts (`tokens`).
enum class TokenCount : std::uint8_t { kTotal, kInput, kOutput, kPrice };
// How an LLM preset reserves (`reserve`): the upper bound, or "estimate".
enum class Reserve : std::uint8_t { kUpperBound, kEstimate };

struct RuleBudget {
  CostKind cost = CostKind::kFixed;
  std::string cost_header;  // kHeader: an HTTP field name
  std::string cost_json;    // kJson: a dotted JSON path (JsonPathProblem)
  SettleKind settle = SettleKind::kNone;
  std::string settle_header;
  std::string settle_json;
  TokenCount tokens = TokenCount::kTotal;  // presets only
  Reserve reserve = Reserve::kUpperBound;  // presets only
  std::int64_t max_output_tokens = 0;      // presets: required; 0 otherwise

  // Whether a request's reservation is settled from its response.
  bool Settles() const { return settle != SettleKind::kNone; }
  // Whether the cost is an LLM preset's (`"openai"`, `"anthropic"`).
  bool FromPreset() const { return cost == CostKind::kOpenAi || cost == CostKind::kAnthropic; }
};

// One [[prices]] entry: `input` and `output` cost units per `unit_tokens`
// tokens of models whose name matches `model` (a trailing '*' matches any
// rest).
struct ModelPrice {
  std::string model;
  double input = 0;
  double output = 0;
  std::int64_t unit_tokens = 1'000'000;
};

}  // namespace tollgate::rules
