// The local store of limits learned from upstreams (algorithms/learned.h):
// per upstream a global block, per bucket its LearnedBucket. Bounded: at
// most `max_buckets` buckets (the least recently used is forgotten; a
// forgotten bucket starts again as unknown). Thread-safe: sharded mutexes,
// two threads on different buckets rarely contend.
#pragma once

#include <array>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "algorithms/learned.h"

namespace tollgate::store {

class LearnedLimits {
 public:
  explicit LearnedLimits(std::size_t max_buckets = 100'000);

  // algorithms::CheckLearned on `bucket` of `upstream`: 0 = go (counted),
  // otherwise ms to wait before checking again.
  std::int64_t Check(std::string_view upstream, std::string_view bucket, std::int64_t now_ms);
  // algorithms::LearnFrom with what a response of `upstream` said.
  void Learn(std::string_view upstream, std::string_view bucket,
             const algorithms::LearnedFacts& facts, std::int64_t now_ms);
  // For tests and the status page.
  algorithms::LearnedBucket Bucket(std::string_view upstream, std::string_view bucket);
  std::int64_t GlobalUntil(std::string_view upstream);

 private:
  static constexpr std::size_t kShards = 16;
  struct Shard {
    std::mutex mutex;
    std::unordered_map<std::string, algorithms::LearnedBucket> buckets;
    std::list<std::string> order;  // least recently used first
    std::unordered_map<std::string, std::list<std::string>::iterator> position;
  };
  Shard& ShardOf(const std::string& key);
  // The bucket for `key`, created (and the oldest forgotten) when absent.
  algorithms::LearnedBucket& Touch(Shard& shard, const std::string& key);
  std::int64_t& Global(std::string_view upstream);

  std::size_t max_per_shard_;
  std::array<Shard, kShards> shards_;
  std::mutex global_mutex_;
  std::unordered_map<std::string, std::int64_t> global_until_;  // by upstream: few
};

}  // namespace tollgate::store
