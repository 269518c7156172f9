// The blocks in force (rules/block_list.h), as admit reads them: a
// snapshot replaced whole by the admin API (and, on Redis, by its refresh).
// Made once per process, it outlives configurations: blocks survive
// reloads. Thread-safe: Current() from any thread, Set() from one.
#pragma once

#include <atomic>
#include <memory>

#include "rules/block_list.h"

namespace tollgate::gateway {

class BlockTable {
 public:
  // The snapshot, or null while no block exists: then one atomic load is all
  // a request pays.
  std::shared_ptr<const rules::BlockList> Current() const {
    if (!any_.load(std::memory_order_acquire)) return nullptr;
    return list_.load(std::memory_order_acquire);
  }
  void Set(std::shared_ptr<const rules::BlockList> list) {
    const bool any = list != nullptr && !list->empty();
    list_.store(any ? std::move(list) : nullptr, std::memory_order_release);
    any_.store(any, std::memory_order_release);
  }

 private:
  std::atomic<bool> any_{false};
  std::atomic<std::shared_ptr<const rules::BlockList>> list_;
};

}  // namespace tollgate::gateway
