// LocalStore: rate-limit state in this process's memory.
//
// Keys are spread over independently locked shards, so threads working on
// different keys rarely meet and threads on the same key are serialized
// (decisions stay exact). Memory is bounded by `max_keys`: each decision
// advances a CLOCK hand over a few slots of its shard, freeing state that is
// back to "fresh" (expired) and clearing reference bits; when a shard is full
// the hand evicts the first entry not used since its last pass (second-chance
// approximation of least-recently-used). Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "algorithms/limit.h"
#include "store/store.h"

namespace tollgate::store {

struct LocalStoreOptions {
  std::size_t max_keys = 1'000'000;
  // Rounded up to a power of two; 0: one per 1024 of max_keys, from 64 to
  // 1024. Two threads that want the same shard at once make one of them
  // sleep in the kernel, so busier stores get more shards.
  std::size_t shards = 0;
};

class LocalStore final : public Store {
 public:
  explicit LocalStore(LocalStoreOptions options = {});
  ~LocalStore() override;
  LocalStore(const LocalStore&) = delete;
  LocalStore& operator=(const LocalStore&) = delete;

  // Completes inline.
  void Decide(const DecideRequest& request, DecisionSink& sink) override;
  std::string_view Kind() const override { return "local"; }

  // The synchronous form used by Decide(), replay and benchmarks.
  algorithms::Decision DecideNow(const DecideRequest& request);

  std::size_t KeyCount() const;
  std::uint64_t Evictions() const;

 private:
  class Shard;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::size_t shard_mask_;
};

}  // namespace tollgate::store
