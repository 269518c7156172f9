#include "gateway/budget/usage.h"

#include <cctype>
#include <limits>

namespace tollgate::gateway::budget {
namespace {

// Every path of `paths`, in the order Sum reads them.
std::vector<std::string> Flatten(const UsagePaths& paths) {
  std::vector<std::string> flat;
  for (const auto* count : {&paths.input, &paths.output, &paths.total}) {
    for (const UsagePaths::Part& part : *count) flat.insert(flat.end(), part.begin(), part.end());
  }
  return flat;
}

// One table: where each API reports each count. OpenAI: chat completions
// (`usage.prompt_tokens`; in a stream the last chunk, with
// stream_options.include_usage), the Responses API (`usage.input_tokens`;
// in a stream the `response.completed` event's `response.usage`).
// Anthropic: `usage` of a message, in a stream `message_start`'s
// `message.usage` and then `message_delta`'s cumulative `usage`; cached
// input counts as input.
const UsagePaths kOpenAi{
    .input = {{"usage.prompt_tokens", "usage.input_tokens", "response.usage.input_tokens"}},
    .output = {{"usage.completion_tokens", "usage.output_tokens", "response.usage.output_tokens"}},
    .total = {{"usage.total_tokens", "response.usage.total_tokens"}},
};
const UsagePaths kAnthropic{
    .input = {{"usage.input_tokens", "message.usage.input_tokens"},
              {"usage.cache_creation_input_tokens", "message.usage.cache_creation_input_tokens"},
              {"usage.cache_read_input_tokens", "message.usage.cache_read_input_tokens"}},
    .output = {{"usage.output_tokens"}},
    .total = {},
};

}  // namespace

BodyFormat BodyFormatOf(std::string_view content_type) {
  constexpr std::string_view kEventStream = "text/event-stream";
  if (content_type.size() < kEventStream.size()) return BodyFormat::kJson;
  for (std::size_t i = 0; i < kEventStream.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(content_type[i])) != kEventStream[i]) {
      return BodyFormat::kJson;
    }
  }
  return BodyFormat::kEventStream;
}

const UsagePaths& UsagePathsOf(LlmApi api) {
  return api == LlmApi::kOpenAi ? kOpenAi : kAnthropic;
}

UsagePaths SinglePath(const std::string& path) { return {.input = {}, .output = {}, .total = {{path}}}; }

std::optional<std::int64_t> Usage::Count(TokenCount which) const {
  switch (which) {
    case TokenCount::kInput:
      return input;
    case TokenCount::kOutput:
      return output;
    case TokenCount::kTotal:
      if (total) return total;
      if (input && output) return *input + *output;
      return std::nullopt;
  }
  return std::nullopt;
}

UsageScanner::UsageScanner(const UsagePaths& paths, BodyFormat format)
    : paths_(paths),
      format_(format),
      fields_(format == BodyFormat::kJson
                  ? std::variant<JsonFields, EventStreamFields>(std::in_place_index<0>, Flatten(paths))
                  : std::variant<JsonFields, EventStreamFields>(std::in_place_index<1>,
                                                                Flatten(paths))) {}

void UsageScanner::Feed(std::string_view bytes) {
  if (auto* json = std::get_if<JsonFields>(&fields_)) {
    json->Feed(bytes);
  } else {
    std::get<EventStreamFields>(fields_).Feed(bytes);
  }
}

void UsageScanner::Reset() {
  if (auto* json = std::get_if<JsonFields>(&fields_)) {
    json->Reset();
  } else {
    std::get<EventStreamFields>(fields_).Reset();
  }
  finished_ = false;
  json_whole_ = false;
}

void UsageScanner::Finish() {
  if (finished_) return;
  finished_ = true;
  if (auto* json = std::get_if<JsonFields>(&fields_)) json_whole_ = json->Finish();
}

std::optional<std::int64_t> UsageScanner::NumberAt(std::size_t i) const {
  if (const auto* json = std::get_if<JsonFields>(&fields_)) {
    // A JSON body counts only whole: a cut one says nothing for sure.
    if (!json_whole_) return std::nullopt;
    return json->Number(i);
  }
  return std::get<EventStreamFields>(fields_).Number(i);
}

std::optional<std::int64_t> UsageScanner::Sum(const std::vector<UsagePaths::Part>& parts,
                                              std::size_t& index) const {
  if (parts.empty()) return std::nullopt;
  std::int64_t sum = 0;
  bool known = true;
  for (const UsagePaths::Part& part : parts) {
    std::optional<std::int64_t> found;
    for (std::size_t k = 0; k < part.size(); ++k, ++index) {
      if (!found) found = NumberAt(index);
    }
    // Parts after the first (cached input) count as zero when absent.
    if (!found && &part == &parts.front()) known = false;
    if (found) {
      // Saturating: an upstream's number is not trusted to be small.
      sum = *found > std::numeric_limits<std::int64_t>::max() - sum
                ? std::numeric_limits<std::int64_t>::max()
                : sum + *found;
    }
  }
  if (!known) return std::nullopt;
  return sum;
}

Usage UsageScanner::usage() const {
  std::size_t index = 0;
  Usage u;
  u.input = Sum(paths_.input, index);
  u.output = Sum(paths_.output, index);
  u.total = Sum(paths_.total, index);
  return u;
}

}  // namespace tollgate::gateway::budget
