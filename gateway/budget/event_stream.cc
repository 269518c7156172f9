#include "gateway/budget/event_stream.h"

#include <cstring>

namespace tollgate::gateway::budget {
namespace {

// Field names longer than this are none the reader knows.
constexpr std::size_t kMaxFieldName = 16;

// Where the line that goes on at `i` ends in `bytes` (a CR or an LF), or
// bytes.size(). Two memchr calls, each over whole words at a time: the LF,
// then a CR before it (rare: most streams end lines with LF alone).
// find_first_of would call memchr on its two-byte set for every byte.
std::size_t LineEnd(std::string_view bytes, std::size_t i) {
  const char* begin = bytes.data() + i;
  const char* end = bytes.data() + bytes.size();
  if (const void* lf = std::memchr(begin, '\n', static_cast<std::size_t>(end - begin))) {
    end = static_cast<const char*>(lf);
  }
  if (const void* cr = std::memchr(begin, '\r', static_cast<std::size_t>(end - begin))) {
    end = static_cast<const char*>(cr);
  }
  return static_cast<std::size_t>(end - bytes.data());
}

}  // namespace

EventStreamFields::EventStreamFields(const std::vector<std::string>& paths)
    : json_(paths), numbers_(paths.size()), strings_(paths.size()) {}

void EventStreamFields::Reset() {
  json_.Reset();
  for (auto& n : numbers_) n.reset();
  for (auto& s : strings_) s.reset();
  state_ = State::kFieldName;
  name_.clear();
  skip_space_ = false;
  after_cr_ = false;
  event_has_data_ = false;
  events_ = 0;
}

std::optional<std::string_view> EventStreamFields::String(std::size_t i) const {
  const auto& s = strings_.at(i);
  if (!s) return std::nullopt;
  return std::string_view(*s);
}

void EventStreamFields::Feed(std::string_view bytes) {
  std::size_t i = 0;
  while (i < bytes.size()) {
    const char c = bytes[i];
    if (after_cr_) {
      after_cr_ = false;
      if (c == '\n') {
        ++i;
        continue;
      }
    }
    if (c == '\r' || c == '\n') {
      after_cr_ = c == '\r';
      EndLine();
      ++i;
      continue;
    }
    switch (state_) {
      case State::kFieldName:
        if (c == ':') {
          if (name_ == "data") {
            state_ = State::kData;
            if (event_has_data_) json_.Feed("\n");
            event_has_data_ = true;
          } else {
            state_ = State::kSkipLine;  // another field, or a comment (":" first)
          }
          skip_space_ = true;
        } else if (name_.size() < kMaxFieldName) {
          name_.push_back(c);
        } else {
          state_ = State::kSkipLine;
        }
        ++i;
        break;
      case State::kData: {
        if (skip_space_) {
          skip_space_ = false;
          if (c == ' ') {
            ++i;
            break;
          }
        }
        // The rest of the line in this piece, at once.
        const std::size_t end = LineEnd(bytes, i);
        json_.Feed(bytes.substr(i, end - i));
        i = end;
        break;
      }
      case State::kSkipLine:
        i = LineEnd(bytes, i);
        break;
    }
  }
}

void EventStreamFields::EndLine() {
  // A line with a field name and no colon is that field with an empty
  // value: "data" then adds an empty line to the data.
  if (state_ == State::kFieldName && !name_.empty()) {
    if (name_ == "data") {
      if (event_has_data_) json_.Feed("\n");
      event_has_data_ = true;
    }
  } else if (state_ == State::kFieldName) {
    EndEvent();  // a blank line
  }
  state_ = State::kFieldName;
  name_.clear();
  skip_space_ = false;
}

void EventStreamFields::EndEvent() {
  if (!event_has_data_) return;
  event_has_data_ = false;
  if (json_.Finish()) {
    ++events_;
    for (std::size_t i = 0; i < numbers_.size(); ++i) {
      if (auto n = json_.Number(i)) numbers_[i] = n;
      if (auto s = json_.String(i)) strings_[i] = std::string(*s);
    }
  }
  json_.Reset();
}

}  // namespace tollgate::gateway::budget
