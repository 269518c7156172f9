// An immutable snapshot (T) replaced whole by one writer and read on every
// request by many threads, such as the admin API's blocks and overrides.
// A reader pays one atomic load of a version number while nothing changes:
// each thread keeps the snapshot it last read (and a reference to it), so
// the shared reference count is touched only when the snapshot changes,
// never by each request. Thread-safe: Current() and Load() from any thread,
// Set() from one thread at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace tollgate::gateway {

namespace snapshot_detail {
// Versions are unique in the process, so that a thread's cached snapshot
// is never mistaken for another table's, nor for an earlier one of the same
// table.
inline std::atomic<std::uint64_t> next_version{1};
}  // namespace snapshot_detail

template <typename T>
class SnapshotTable {
 public:
  // The snapshot, or null while there is none (or an empty one was set).
  // Valid on this thread until its next call of Current() on a table of
  // this T; keep Load()'s reference for longer.
  const T* Current() const {
    const std::uint64_t version = version_.load(std::memory_order_acquire);
    if (version == 0) return nullptr;
    Cache& cache = cache_;
    if (cache.table != this || cache.version != version) {
      cache.snapshot = snapshot_.load(std::memory_order_acquire);
      cache.table = this;
      cache.version = version;
    }
    return cache.snapshot.get();
  }
  // A reference of the caller's own to the snapshot, or null.
  std::shared_ptr<const T> Load() const {
    if (version_.load(std::memory_order_acquire) == 0) return nullptr;
    return snapshot_.load(std::memory_order_acquire);
  }
  // `snapshot`: null or empty (T::empty()) when there is none.
  void Set(std::shared_ptr<const T> snapshot) {
    const bool any = snapshot != nullptr && !snapshot->empty();
    snapshot_.store(any ? std::move(snapshot) : nullptr, std::memory_order_release);
    version_.store(any ? snapshot_detail::next_version.fetch_add(1, std::memory_order_relaxed) : 0,
                   std::memory_order_release);
  }

 private:
  struct Cache {
    const SnapshotTable* table = nullptr;
    std::uint64_t version = 0;
    std::shared_ptr<const T> snapshot;
  };
  static inline thread_local Cache cache_;

  std::atomic<std::uint64_t> version_{0};  // 0: none
  std::atomic<std::shared_ptr<const T>> snapshot_;
};

}  // namespace tollgate::gateway
