// DueQueue: times at which something needs looking at, earliest first, for
// times that mostly come in order (now + a fixed ttl, as a lease's end):
// those are queued first-in first-out, O(1) each; the few earlier than the
// back of that queue go to a heap, O(log n). Times are integers on the
// caller's scale (milliseconds). Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <queue>
#include <utility>
#include <vector>

namespace tollgate::store {

template <typename T>
class DueQueue {
 public:
  struct Item {
    std::int64_t at;
    T value;
  };

  void Push(std::int64_t at, T value) {
    if (in_order_.empty() || in_order_.back().at <= at) {
      in_order_.push_back({at, std::move(value)});
    } else {
      early_.push({at, std::move(value)});
    }
  }
  // The earliest item, or null when empty; valid until the next Push or Pop.
  const Item* Top() const {
    if (early_.empty()) return in_order_.empty() ? nullptr : &in_order_.front();
    if (in_order_.empty() || early_.top().at < in_order_.front().at) return &early_.top();
    return &in_order_.front();
  }
  // Removes Top(); not when empty.
  void Pop() {
    if (!in_order_.empty() && Top() == &in_order_.front()) {
      in_order_.pop_front();
    } else {
      early_.pop();
    }
  }
  bool empty() const { return in_order_.empty() && early_.empty(); }
  std::size_t size() const { return in_order_.size() + early_.size(); }

 private:
  struct Later {
    bool operator()(const Item& a, const Item& b) const { return a.at > b.at; }
  };
  std::deque<Item> in_order_;
  std::priority_queue<Item, std::vector<Item>, Later> early_;
};

}  // namespace tollgate::store
