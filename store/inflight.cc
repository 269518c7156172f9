#include "store/inflight.h"

#include <functional>

namespace tollgate::store {

InflightGuard& InflightGuard::operator=(InflightGuard&& other) noexcept {
  if (this != &other) {
    Release();
    table_ = std::exchange(other.table_, nullptr);
    key_ = std::move(other.key_);
  }
  return *this;
}

void InflightGuard::Release() {
  if (table_ != nullptr) std::exchange(table_, nullptr)->Release(key_);
}

InflightTable::Shard& InflightTable::ShardOf(std::string_view key) {
  return shards_[std::hash<std::string_view>{}(key) % kShards];
}

std::optional<InflightGuard> InflightTable::TryAcquire(std::string_view key, std::int64_t max) {
  Shard& shard = ShardOf(key);
  std::string owned(key);
  {
    std::lock_guard lock(shard.mutex);
    std::int64_t& count = shard.counts[owned];
    if (count >= max) {
      if (count == 0) shard.counts.erase(owned);
      return std::nullopt;
    }
    ++count;
  }
  return InflightGuard(this, std::move(owned));
}

void InflightTable::Release(const std::string& key) {
  Shard& shard = ShardOf(key);
  std::lock_guard lock(shard.mutex);
  auto it = shard.counts.find(key);
  if (it != shard.counts.end() && --it->second <= 0) shard.counts.erase(it);
}

std::int64_t InflightTable::Count(std::string_view key) {
  Shard& shard = ShardOf(key);
  std::lock_guard lock(shard.mutex);
  auto it = shard.counts.find(std::string(key));
  return it == shard.counts.end() ? 0 : it->second;
}

std::size_t InflightTable::KeyCount() {
  std::size_t n = 0;
  for (Shard& shard : shards_) {
    std::lock_guard lock(shard.mutex);
    n += shard.counts.size();
  }
  return n;
}

}  // namespace tollgate::store
