#include "gateway/budget/event_stream.h"

#include <string.h>  // memmem

#include <algorithm>
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
    : json_(paths), numbers_(paths.size()), strings_(paths.size()) {
  for (const std::string& path : paths) {
    const std::string_view last = std::string_view(path).substr(path.rfind('.') + 1);
    // An index: the key that holds the value is not named.
    if (last.empty() || last.find_first_not_of("0123456789") == std::string_view::npos) {
      last_keys_.clear();
      break;
    }
    const std::string key = '"' + std::string(last) + '"';
    if (std::find(last_keys_.begin(), last_keys_.end(), key) == last_keys_.end()) {
      last_keys_.push_back(key);
    }
  }
  // The keys' longest common ending (at least the closing quote): one
  // memmem() pass finds where any of them may end.
  if (!last_keys_.empty()) {
    common_end_ = last_keys_.front();
    for (const std::string& key : last_keys_) {
      std::size_t n = 0;
      while (n < key.size() && n < common_end_.size() &&
             key[key.size() - 1 - n] == common_end_[common_end_.size() - 1 - n]) {
        ++n;
      }
      common_end_ = common_end_.substr(common_end_.size() - n);
    }
  }
}

void EventStreamFields::Reset() {
  json_.Reset();
  for (auto& n : numbers_) n.reset();
  for (auto& s : strings_) s.reset();
  state_ = State::kFieldName;
  name_.clear();
  skip_space_ = false;
  after_cr_ = false;
  event_has_data_ = false;
  held_.clear();
  streaming_ = false;
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
            if (event_has_data_) AddData("\n");
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
        AddData(bytes.substr(i, end - i));
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
      if (event_has_data_) AddData("\n");
      event_has_data_ = true;
    }
  } else if (state_ == State::kFieldName) {
    EndEvent();  // a blank line
  }
  state_ = State::kFieldName;
  name_.clear();
  skip_space_ = false;
}

void EventStreamFields::AddData(std::string_view bytes) {
  if (streaming_) {
    json_.Feed(bytes);
  } else if (held_.size() + bytes.size() <= kHeldEvent) {
    held_.append(bytes);
  } else {
    streaming_ = true;
    json_.Feed(held_);
    held_.clear();
    json_.Feed(bytes);
  }
}

bool EventStreamFields::MayHold(std::string_view data) const {
  if (last_keys_.empty() || std::memchr(data.data(), '\\', data.size()) != nullptr) return true;
  const char* const begin = data.data();
  const char* const end = begin + data.size();
  for (const char* at = begin;;) {
    const void* found = ::memmem(at, static_cast<std::size_t>(end - at), common_end_.data(),
                                 common_end_.size());
    if (found == nullptr) return false;
    const char* key_end = static_cast<const char*>(found) + common_end_.size();
    for (const std::string& key : last_keys_) {
      if (static_cast<std::size_t>(key_end - begin) < key.size() ||
          std::string_view(key_end - key.size(), key.size()) != key) {
        continue;
      }
      // A key, not a string value: a colon follows.
      const char* p = key_end;
      while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) ++p;
      if (p < end && *p == ':') return true;
    }
    at = static_cast<const char*>(found) + 1;
  }
}

void EventStreamFields::EndEvent() {
  if (!event_has_data_) return;
  event_has_data_ = false;
  if (!streaming_) {
    const bool parse = MayHold(held_);
    if (parse) json_.Feed(held_);
    held_.clear();
    if (!parse) return;  // json_ was fed nothing: still reset
  }
  streaming_ = false;
  if (json_.Finish()) {
    for (std::size_t i = 0; i < numbers_.size(); ++i) {
      if (auto n = json_.Number(i)) numbers_[i] = n;
      if (auto s = json_.String(i)) strings_[i] = std::string(*s);
    }
  }
  json_.Reset();
}

}  // namespace tollgate::gateway::budget
