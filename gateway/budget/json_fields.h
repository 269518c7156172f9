// Picks a few fields out of a JSON text that arrives in pieces, without
// holding the text or building its tree: Boost.JSON's SAX parser
// (basic_parser) with a handler that follows the path of the value being
// read and keeps the values at the wanted paths (the last one wins when a
// path occurs twice). Used for a request's cost (`cost = { json = "a.b" }`,
// the LLM presets' output bounds) and for a response's usage.
//
// Paths are dotted: object keys, and array indices as decimal numbers
// ("choices.0.index"); a key containing a dot cannot be named. Numbers are
// kept as non-negative integers: a fraction is rounded up, a negative or
// non-finite number is not kept; true and false are kept as 1 and 0. Strings are kept up to kMaxString bytes
// (longer ones are not kept). Not thread-safe; cheap to Reset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tollgate::gateway::budget {

class JsonFields {
 public:
  static constexpr std::size_t kMaxString = 256;

  explicit JsonFields(const std::vector<std::string>& paths);
  ~JsonFields();
  JsonFields(JsonFields&&) noexcept;
  JsonFields& operator=(JsonFields&&) noexcept;

  // The next bytes of the text. False once the text is known not to be
  // JSON (or deeper than the parser's limit): nothing more is kept.
  bool Feed(std::string_view bytes);
  // The end of the text; false if it was incomplete or not JSON.
  bool Finish();
  // Forgets the text and the values: ready for the next document.
  void Reset();

  // The value kept for paths[i], if any.
  std::optional<std::int64_t> Number(std::size_t i) const;
  std::optional<std::string_view> String(std::size_t i) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The value at `path` of one whole JSON text; nullopt when the text is not
// JSON or has no number there.
std::optional<std::int64_t> NumberAt(std::string_view text, const std::string& path);

}  // namespace tollgate::gateway::budget
