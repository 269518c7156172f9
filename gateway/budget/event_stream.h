// Reads a `text/event-stream` (server-sent events) as it arrives and hands
// the data of each event, as it comes, to a JsonFields: no event is held,
// whatever its size. Lines end in LF, CRLF or CR; `data:` lines of one
// event are joined with LF; a blank line ends the event; other fields and
// comments are skipped. The fields kept over the stream are the last
// value each wanted path had in any event that was whole JSON (so a
// `data: [DONE]` or a cut event changes nothing). Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/budget/json_fields.h"

namespace tollgate::gateway::budget {

class EventStreamFields {
 public:
  explicit EventStreamFields(const std::vector<std::string>& paths);

  void Feed(std::string_view bytes);
  // The end of the stream: an event not ended by a blank line is not used
  // (the stream was cut within it).
  void Finish() {}
  // Forgets the stream and the values: ready for the next one.
  void Reset();

  std::optional<std::int64_t> Number(std::size_t i) const { return numbers_.at(i); }
  std::optional<std::string_view> String(std::size_t i) const;
  std::size_t events() const { return events_; }  // events that were JSON

 private:
  enum class State { kFieldName, kData, kSkipLine };
  void EndLine();
  void EndEvent();

  JsonFields json_;
  std::vector<std::optional<std::int64_t>> numbers_;
  std::vector<std::optional<std::string>> strings_;
  State state_ = State::kFieldName;
  std::string name_;        // the field name read so far on this line
  bool skip_space_ = false;  // the first byte of a field's value, if a space, is not in it
  bool after_cr_ = false;    // a CR ended the last line: an LF right after it is part of it
  bool event_has_data_ = false;
  std::size_t events_ = 0;
};

}  // namespace tollgate::gateway::budget
