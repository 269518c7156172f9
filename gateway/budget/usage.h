// What an upstream's response says it cost: the token counts of an LLM
// API's `usage` (OpenAI chat completions and Responses API, Anthropic
// messages; a JSON body or a `text/event-stream`), or one number at a
// path (`settle = { json = "usage.total_tokens" }`), read while the body
// streams past (nothing is held back or kept beyond a few fields).
//
// Each count (input, output, total) is a sum of parts, each part the
// first of its alternative paths that the response carried (its last
// value, in a stream). A count some part of which the response never
// carried is unknown: the caller keeps the reservation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gateway/budget/event_stream.h"
#include "gateway/budget/json_fields.h"

namespace tollgate::gateway::budget {

enum class LlmApi { kOpenAi, kAnthropic };
enum class TokenCount { kTotal, kInput, kOutput };
enum class BodyFormat { kJson, kEventStream };

// The body format of a response with this Content-Type (text/event-stream
// or anything else, read as JSON).
BodyFormat BodyFormatOf(std::string_view content_type);

// Which paths make up each count.
struct UsagePaths {
  using Part = std::vector<std::string>;  // alternatives, the first found wins
  std::vector<Part> input, output, total;
};

// The paths of an API's usage, in both body formats.
const UsagePaths& UsagePathsOf(LlmApi api);
// A single number at `path` as the total.
UsagePaths SinglePath(const std::string& path);

struct Usage {
  std::optional<std::int64_t> input, output, total;
  // total when the response gave it, else input + output when both known.
  std::optional<std::int64_t> Count(TokenCount which) const;
};

class UsageScanner {
 public:
  UsageScanner(const UsagePaths& paths, BodyFormat format);

  // The next bytes of the response body, then its end.
  void Feed(std::string_view bytes);
  void Finish();
  // Ready for the next body, of the same paths and format (cheaper than a
  // new scanner: the parser and the paths are kept).
  void Reset();
  BodyFormat format() const { return format_; }

  Usage usage() const;

 private:
  std::optional<std::int64_t> Sum(const std::vector<UsagePaths::Part>& parts,
                                  std::size_t& index) const;
  std::optional<std::int64_t> NumberAt(std::size_t i) const;

  const UsagePaths& paths_;
  BodyFormat format_;
  std::variant<JsonFields, EventStreamFields> fields_;
  bool finished_ = false;
  bool json_whole_ = false;  // kJson: the body was complete JSON
};

}  // namespace tollgate::gateway::budget
