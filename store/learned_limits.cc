#include "store/learned_limits.h"

#include <functional>

namespace tollgate::store {
namespace {

std::string BucketKey(std::string_view upstream, std::string_view bucket) {
  std::string key(upstream);
  key.push_back('\x1f');
  key.append(bucket);
  return key;
}

}  // namespace

LearnedLimits::LearnedLimits(std::size_t max_buckets)
    : max_per_shard_(std::max<std::size_t>(1, max_buckets / kShards)) {}

LearnedLimits::Shard& LearnedLimits::ShardOf(const std::string& key) {
  return shards_[std::hash<std::string>{}(key) % kShards];
}

algorithms::LearnedBucket& LearnedLimits::Touch(Shard& shard, const std::string& key) {
  if (auto it = shard.position.find(key); it != shard.position.end()) {
    shard.order.splice(shard.order.end(), shard.order, it->second);
    return shard.buckets[key];
  }
  if (shard.buckets.size() >= max_per_shard_) {
    shard.buckets.erase(shard.order.front());
    shard.position.erase(shard.order.front());
    shard.order.pop_front();
  }
  shard.order.push_back(key);
  shard.position[key] = std::prev(shard.order.end());
  return shard.buckets[key];
}

std::int64_t& LearnedLimits::Global(std::string_view upstream) {
  return global_until_[std::string(upstream)];
}

std::int64_t LearnedLimits::Check(std::string_view upstream, std::string_view bucket,
                                  std::int64_t now_ms) {
  std::int64_t global_until = 0;
  {
    std::lock_guard lock(global_mutex_);
    global_until = Global(upstream);
  }
  const std::string key = BucketKey(upstream, bucket);
  Shard& shard = ShardOf(key);
  std::lock_guard lock(shard.mutex);
  return algorithms::CheckLearned(global_until, Touch(shard, key), now_ms);
}

void LearnedLimits::Learn(std::string_view upstream, std::string_view bucket,
                          const algorithms::LearnedFacts& facts, std::int64_t now_ms) {
  const std::string key = BucketKey(upstream, bucket);
  Shard& shard = ShardOf(key);
  std::int64_t global_until = 0;
  {
    std::lock_guard lock(global_mutex_);
    global_until = Global(upstream);
  }
  std::int64_t learned_global = 0;
  {
    std::lock_guard lock(shard.mutex);
    learned_global = algorithms::LearnFrom(facts, global_until, Touch(shard, key), now_ms);
  }
  if (learned_global != global_until) {
    std::lock_guard lock(global_mutex_);
    std::int64_t& g = Global(upstream);
    g = std::max(g, learned_global);
  }
}

algorithms::LearnedBucket LearnedLimits::Bucket(std::string_view upstream,
                                                std::string_view bucket) {
  const std::string key = BucketKey(upstream, bucket);
  Shard& shard = ShardOf(key);
  std::lock_guard lock(shard.mutex);
  auto it = shard.buckets.find(key);
  return it == shard.buckets.end() ? algorithms::LearnedBucket{} : it->second;
}

std::int64_t LearnedLimits::GlobalUntil(std::string_view upstream) {
  std::lock_guard lock(global_mutex_);
  return Global(upstream);
}

}  // namespace tollgate::store
