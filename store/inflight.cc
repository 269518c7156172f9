#include "store/inflight.h"

#include <functional>

namespace tollgate::store {

InflightGuard& InflightGuard::operator=(InflightGuard&& other) noexcept {
  if (this != &other) {
    Release();
    keeper_ = std::move(other.keeper_);
    other.keeper_.reset();
    key_ = std::move(other.key_);
    lease_ = std::move(other.lease_);
  }
  return *this;
}

void InflightGuard::Release() {
  std::weak_ptr<PlaceKeeper> keeper = std::move(keeper_);
  keeper_.reset();
  if (std::shared_ptr<PlaceKeeper> k = keeper.lock()) k->GiveBack(key_, lease_);
}

struct InflightTable::Keeper final : PlaceKeeper {
  explicit Keeper(InflightTable& t) : table(t) {}
  void GiveBack(const std::string& key, const std::string&) override { table.Release(key); }
  InflightTable& table;
};

InflightTable::InflightTable() : keeper_(std::make_shared<Keeper>(*this)) {}

InflightTable::Shard& InflightTable::ShardOf(std::string_view key) {
  return shards_[std::hash<std::string_view>{}(key) % kShards];
}

std::optional<InflightGuard> InflightTable::TryAcquire(std::string_view key, std::int64_t max) {
  std::int64_t held_before = 0;
  return TryAcquire(key, max, held_before);
}

std::optional<InflightGuard> InflightTable::TryAcquire(std::string_view key, std::int64_t max,
                                                       std::int64_t& held_before) {
  Shard& shard = ShardOf(key);
  std::string owned(key);
  {
    std::lock_guard lock(shard.mutex);
    std::int64_t& count = shard.counts[owned];
    held_before = count;
    if (count >= max) {
      if (count == 0) shard.counts.erase(owned);
      return std::nullopt;
    }
    ++count;
  }
  return InflightGuard(keeper_, std::move(owned));
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
