// The stream ids an HTTP/2 connection reset most recently, for telling a
// peer that had not yet seen our RST_STREAM when it sent more on the
// stream (its frames are ignored, RFC 9113 §5.1) from one that reuses a
// stream id (a connection error, §5.1.1). Single-threaded.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tollgate::gateway::http2_detail {

class RecentIds {
 public:
  // Remembers the last `capacity` ids added (no memory until the first).
  explicit RecentIds(std::size_t capacity) : capacity_(std::max<std::size_t>(capacity, 1)) {}

  void Add(std::int32_t id) {
    if (ids_.size() < capacity_) {
      ids_.push_back(id);
      return;
    }
    ids_[next_] = id;
    next_ = (next_ + 1) % capacity_;
  }
  bool Contains(std::int32_t id) const {
    return std::find(ids_.begin(), ids_.end(), id) != ids_.end();
  }

 private:
  std::size_t capacity_;
  std::size_t next_ = 0;  // the oldest, once full
  std::vector<std::int32_t> ids_;
};

}  // namespace tollgate::gateway::http2_detail
