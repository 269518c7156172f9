// Reads a `text/event-stream` (server-sent events) as it arrives and hands
// the data of each event to a JsonFields. Lines end in LF, CRLF or CR;
// `data:` lines of one event are joined with LF; a blank line ends the
// event; other fields and comments are skipped. The fields kept over the
// stream are the last value each wanted path had in any event that was
// whole JSON (so a `data: [DONE]` or a cut event changes nothing).
//
// An event's data is held up to kHeldEvent bytes, so that an event that
// cannot hold a wanted value is not parsed at all: one whose text has no
// backslash (no escaped key) and names none of the wanted paths' last keys
// as a key (`"total_tokens":`), as most events of a model's stream (each
// token) do not. A longer event goes to the parser as it comes, whatever
// its size. Not thread-safe.
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
  static constexpr std::size_t kHeldEvent = 4096;

  explicit EventStreamFields(const std::vector<std::string>& paths);

  void Feed(std::string_view bytes);
  // The end of the stream: an event not ended by a blank line is not used
  // (the stream was cut within it).
  void Finish() {}
  // Forgets the stream and the values: ready for the next one.
  void Reset();

  std::optional<std::int64_t> Number(std::size_t i) const { return numbers_.at(i); }
  std::optional<std::string_view> String(std::size_t i) const;

 private:
  enum class State { kFieldName, kData, kSkipLine };
  void EndLine();
  void EndEvent();
  // The next bytes of the event's data.
  void AddData(std::string_view bytes);
  // Whether `data` (a whole event's) may hold a value at a wanted path.
  bool MayHold(std::string_view data) const;

  JsonFields json_;
  std::vector<std::optional<std::int64_t>> numbers_;
  std::vector<std::optional<std::string>> strings_;
  State state_ = State::kFieldName;
  std::string name_;        // the field name read so far on this line
  bool skip_space_ = false;  // the first byte of a field's value, if a space, is not in it
  bool after_cr_ = false;    // a CR ended the last line: an LF right after it is part of it
  bool event_has_data_ = false;
  // The wanted paths' last keys, quoted ("\"total_tokens\""); empty when
  // a path ends in an array index (then every event is parsed).
  std::vector<std::string> last_keys_;
  std::string common_end_;  // the longest ending all of last_keys_ share
  std::string held_;       // the event's data so far, up to kHeldEvent bytes
  bool streaming_ = false;  // the event outgrew held_: its data goes to json_ as it comes
};

}  // namespace tollgate::gateway::budget
