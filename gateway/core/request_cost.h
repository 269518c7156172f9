// Phase admit, for rate rules whose cost comes from the request body
// (rules/budget.h): `cost = { json = "a.b" }`, `"request_bytes"`, and the
// LLM presets `"openai"` and `"anthropic"`, which reserve an upper bound
// of the tokens a request may use (gateway/budget/llm_request.h) and may
// need the request rewritten to bound its output or to ask a stream for
// its usage. A header's cost is read without the body
// (gateway/core/limits.h, CostFromHeader). Pure: no I/O; worker thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/budget/usage.h"
#include "rules/budget.h"
#include "rules/rule_set.h"

namespace tollgate::gateway {

// What the body said, beyond each hit's cost.
struct BodyCosts {
  // The body to forward in place of the client's, when an LLM preset
  // added an output bound or stream_options.include_usage; nullopt: as
  // sent.
  std::optional<std::string> rewritten;
  // An LLM request's "model" ("" when none): per-model prices settle by it.
  std::string model;
};

// Sets the cost of every hit in `hits` whose rule takes it from the body
// (RuleHit::cost): a JSON path's number, the body's size, or an LLM
// preset's reservation, else the rule's cost_default. With several preset
// rules, the smallest max_output_tokens is the one written into the
// request, and every preset rule reserves by it. Completes the keys that
// lack their json:PATH parts (RuleHit::body_key); a hit whose key the body
// lacks a value for gets an empty key: its rule does not apply.
void CostsFromBody(std::span<rules::RuleHit> hits, std::string_view body,
                   const std::vector<rules::ModelPrice>& prices, BodyCosts& out);

// The API whose shape an LLM preset's requests and responses have.
budget::LlmApi LlmApiOf(rules::CostKind preset);

// The price of `model` (the first [[prices]] entry that matches: a trailing
// '*' matches any rest); null when none does.
const rules::ModelPrice* PriceOf(const std::vector<rules::ModelPrice>& prices,
                                 std::string_view model);

// Cost units of `input` and `output` tokens at `price`, rounded up.
std::int64_t PricedCost(const rules::ModelPrice& price, std::int64_t input, std::int64_t output);

}  // namespace tollgate::gateway
