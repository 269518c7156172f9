// The request side of an LLM preset (`cost = "openai"` / `"anthropic"`):
// what a chat completion, Responses API or messages request may cost at
// most, read from its JSON body, and the request as forwarded when
// tollgate must bound the output itself or ask for the usage of a stream.
//
// The upper bound of the input is the body's size in bytes: every token
// the model reads comes from at least one byte of it (no byte-level BPE
// token covers less than a byte, and the tokens a chat template adds per
// message are fewer than the JSON around each message). Inputs that are
// not in the body (an image by URL) are not bounded by it; see
// docs/token-budgets.md. The output bound is the request's own
// (`max_completion_tokens`, `max_tokens`, `max_output_tokens`) or the
// rule's `max_output_tokens`, which is then written into the request.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/budget/usage.h"

namespace tollgate::gateway::budget {

enum class Reserve { kUpperBound, kEstimate };

struct LlmRequest {
  std::int64_t body_bytes = 0;
  std::optional<std::int64_t> output_bound;  // the request's own
  std::string model;                         // "" when absent
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage = true
  bool responses_api = false;  // an `input` and no `messages`: OpenAI's Responses API
};

// The request's fields (nullopt when the body is not a JSON object) and,
// in the same parse, the body to forward into `rewritten`: `body`
// with the output bound added when the request has none (`max_tokens`, or
// `max_output_tokens` for the Responses API) and, for an OpenAI stream
// without it, stream_options.include_usage = true; nullopt when nothing
// needs to change (or the body is not a JSON object). Anthropic requires
// max_tokens, so only OpenAI requests change.
std::optional<LlmRequest> ReadLlmRequest(std::string_view body, LlmApi api,
                                         std::int64_t rule_output_bound,
                                         std::optional<std::string>& rewritten);

// The reservation for `which` count, given the output bound in force (the
// request's, else the rule's). kEstimate takes a quarter of the input
// bytes, rounded up, instead of all of them.
std::int64_t ReservedTokens(const LlmRequest& request, std::int64_t output_bound,
                            TokenCount which, Reserve reserve);

}  // namespace tollgate::gateway::budget
