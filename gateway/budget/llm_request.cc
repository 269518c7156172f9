#include "gateway/budget/llm_request.h"

#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <algorithm>
#include <cstdint>
#include <string>

namespace tollgate::gateway::budget {
namespace {

// A token count in a request: a non-negative integer.
std::optional<std::int64_t> CountOf(const boost::json::object& object, std::string_view key) {
  const boost::json::value* v = object.if_contains(boost::json::string_view(key.data(), key.size()));
  if (v == nullptr) return std::nullopt;
  if (v->is_int64() && v->get_int64() >= 0) return v->get_int64();
  if (v->is_uint64()) return static_cast<std::int64_t>(std::min<std::uint64_t>(v->get_uint64(), INT64_MAX));
  return std::nullopt;
}

bool IsTrue(const boost::json::value* v) { return v != nullptr && v->is_bool() && v->get_bool(); }

// The fields of a request's JSON object.
LlmRequest FieldsOf(const boost::json::object& object, std::size_t body_bytes) {
  LlmRequest request;
  request.body_bytes = static_cast<std::int64_t>(body_bytes);
  for (std::string_view key : {"max_completion_tokens", "max_tokens", "max_output_tokens"}) {
    if (auto n = CountOf(object, key)) {
      request.output_bound = n;
      break;
    }
  }
  if (const auto* model = object.if_contains("model"); model != nullptr && model->is_string()) {
    request.model = std::string(model->get_string());
  }
  request.stream = IsTrue(object.if_contains("stream"));
  if (const auto* options = object.if_contains("stream_options");
      options != nullptr && options->is_object()) {
    request.include_usage = IsTrue(options->get_object().if_contains("include_usage"));
  }
  // The Responses API names its prompt `input`; chat completions `messages`.
  request.responses_api = object.contains("input") && !object.contains("messages");
  return request;
}

// What the request lacks of an output bound and of include_usage.
struct Additions {
  bool bound = false;
  bool usage = false;
  const char* bound_key = "max_tokens";
};

Additions AdditionsOf(LlmApi api, const LlmRequest& request, std::int64_t rule_output_bound) {
  Additions add;
  if (api != LlmApi::kOpenAi) return add;
  add.bound = !request.output_bound && rule_output_bound > 0;
  add.usage = request.stream && !request.include_usage && !request.responses_api;
  if (request.responses_api) add.bound_key = "max_output_tokens";
  return add;
}

// `body` with the additions written in as text before the closing brace of
// its object, which none of their keys is in: the client's bytes kept as
// they are, and no serializer pass. nullopt where that does not apply.
std::optional<std::string> Spliced(std::string_view body, const boost::json::object& object,
                                   const Additions& add, std::int64_t rule_output_bound) {
  if ((add.bound && object.contains(add.bound_key)) ||
      (add.usage && object.contains("stream_options"))) {
    return std::nullopt;
  }
  const std::size_t close = body.find_last_not_of(" \t\r\n");
  if (close == std::string_view::npos || body[close] != '}') return std::nullopt;
  std::string out(body.substr(0, close));
  bool first = object.empty();
  if (add.bound) {
    out += first ? "\"" : ",\"";
    out += add.bound_key;
    out += "\":";
    out += std::to_string(rule_output_bound);
    first = false;
  }
  if (add.usage) out += first ? R"("stream_options":{"include_usage":true})"
                              : R"(,"stream_options":{"include_usage":true})";
  out.append(body.substr(close));
  return out;
}

// `object` with the additions, serialized: where a key is there with a
// value that is no count (or stream_options is no object), it is replaced.
std::string Rewritten(boost::json::object& object, const Additions& add,
                      std::int64_t rule_output_bound) {
  if (add.bound) object[add.bound_key] = rule_output_bound;
  if (add.usage) {
    boost::json::value& options = object["stream_options"];
    if (!options.is_object()) options = boost::json::object(object.storage());
    options.get_object()["include_usage"] = true;
  }
  return boost::json::serialize(object);
}

}  // namespace

std::optional<LlmRequest> ReadLlmRequest(std::string_view body, LlmApi api,
                                         std::int64_t rule_output_bound,
                                         std::optional<std::string>& rewritten) {
  rewritten.reset();
  // One parse for both, its tree in a buffer of the stack's (a chat
  // request is small; a larger one takes more from the heap).
  unsigned char buffer[4096];
  boost::json::monotonic_resource resource(buffer, sizeof(buffer));
  boost::system::error_code ec;
  boost::json::value value =
      boost::json::parse(boost::json::string_view(body.data(), body.size()), ec, &resource);
  if (ec || !value.is_object()) return std::nullopt;
  boost::json::object& object = value.get_object();
  const LlmRequest request = FieldsOf(object, body.size());
  const Additions add = AdditionsOf(api, request, rule_output_bound);
  if (add.bound || add.usage) {
    rewritten = Spliced(body, object, add, rule_output_bound);
    if (!rewritten) rewritten = Rewritten(object, add, rule_output_bound);
  }
  return request;
}

std::int64_t ReservedTokens(const LlmRequest& request, std::int64_t output_bound,
                            TokenCount which, Reserve reserve) {
  const std::int64_t input =
      reserve == Reserve::kEstimate ? (request.body_bytes + 3) / 4 : request.body_bytes;
  switch (which) {
    case TokenCount::kInput:
      return input;
    case TokenCount::kOutput:
      return output_bound;
    case TokenCount::kTotal:
      return input + output_bound;
  }
  return input + output_bound;
}

}  // namespace tollgate::gateway::budget
