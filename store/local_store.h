// LocalStore: rate-limit state in this process's memory.
//
// Keys are spread over independently locked shards, so threads working on
// different keys rarely meet and threads on the same key are serialized
// (decisions stay exact). Memory is bounded by `max_keys`: each decision
// advances a CLOCK hand over a few slots of its shard, freeing state that is
// back to "fresh" (expired) and clearing reference bits; when a shard is full
// the hand evicts the first entry not used since its last pass (second-chance
// approximation of least-recently-used). Thread-safe.
//
// Keys live in partitions, one per rule (AssignPartitions), each with its
// own shards and its own share of the keys: a flood of keys in one rule's
// partition evicts that rule's keys only, never another rule's state.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/decide.h"
#include "algorithms/limit.h"
#include "store/store.h"

namespace tollgate::store {

struct LocalStoreOptions {
  // The bound of partition 0, the one a store starts with (until
  // AssignPartitions gives the keys out).
  std::size_t max_keys = 1'000'000;
  // Shards per partition, rounded up to a power of two; 0: one per 1024 of
  // the partition's first max_keys, from 64 to 1024, but no more than one
  // per 8 keys. Two threads that want the same shard at once make one of
  // them sleep in the kernel, so busier stores get more shards.
  std::size_t shards = 0;
};

// One partition's name (a rule's) and bound, for AssignPartitions.
struct PartitionShare {
  std::string_view name;
  std::size_t max_keys = 0;  // at least 1
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

  // Settles a reservation in one step under the key's shard lock
  // (algorithms::Settle). A key without state (expired, evicted, or of
  // another limit) is settled on a fresh state. Completes inline, kOk.
  void Settle(const SettleRequest& request, DecisionSink& sink) override;
  // Its synchronous form.
  algorithms::Decision SettleNow(const SettleRequest& request);

  // What the state of `request`'s key allows at request.now_ms, window by
  // window into `out` (one per window of request.limit), without changing
  // it; a key without state (or of another limit) shows a fresh state's.
  // request.cost is not used.
  void Inspect(const DecideRequest& request, std::span<algorithms::WindowView> out);
  // Forgets `key`'s state in `partition`: its next request starts afresh.
  // Whether it had any.
  bool Erase(std::string_view key, std::uint32_t partition);

  // Gives each of `shares` a partition bounded by its max_keys and returns
  // their indices for DecideRequest::partition, in order. A name of the
  // previous call keeps its partition, and so its keys (a smaller bound
  // evicts its excess, two keys per new key; a partition holds at least a
  // key per shard, which a share far smaller than the one the partition was
  // made for may exceed); a partition whose name is no longer given is
  // emptied and may be given to a new name. Called when a
  // configuration is built, one call at a time, while decisions go on (also
  // decisions with indices of earlier calls: those stay valid).
  std::vector<std::uint32_t> AssignPartitions(std::span<const PartitionShare> shares);

  std::size_t KeyCount() const;     // in every partition
  std::uint64_t Evictions() const;  // in every partition, since the start
  struct PartitionStats {
    std::size_t keys = 0;
    std::uint64_t evictions = 0;  // since the partition got its current name
  };
  PartitionStats Stats(std::uint32_t partition) const;

 private:
  class Shard;
  class Partition;
  Partition& NewPartition(std::size_t max_keys);  // with assign_mutex_ held

  const LocalStoreOptions options_;
  // Partitions by index, as decisions read them: grown (into a new array,
  // the old one kept, as decisions may still read it) but never shrunk.
  std::atomic<Partition* const*> directory_{nullptr};
  mutable std::mutex assign_mutex_;  // the members below
  std::vector<std::unique_ptr<Partition>> partitions_;
  std::vector<std::unique_ptr<Partition*[]>> directories_;
  std::size_t capacity_ = 0;  // of directories_.back()
};

}  // namespace tollgate::store
