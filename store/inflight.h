// Places held by requests in flight: an InflightGuard holds one place of a
// key from admission to the end of the request's exchange and gives it back
// on every path (completion, client abort, upstream error, timeout) because
// its destructor does. Who keeps the count is a PlaceKeeper: the local
// InflightTable here, Redis leases in store/redis_coordinator.h.
//
// InflightTable counts places per key (rule keys for `max_inflight`,
// upstream names for `max_connections`, waiting lines). Thread-safe:
// sharded mutexes; a key whose count falls to zero is removed, so memory
// follows the requests in flight.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace tollgate::store {

// Takes places back. Implementations are shared by weak_ptr: a guard that
// outlives its keeper gives nothing back (a Redis lease then expires).
class PlaceKeeper {
 public:
  // `key` and `lease` as given to the guard. Thread-safety: that of the
  // keeper (InflightTable: any thread; Redis: the keeper's I/O thread).
  virtual void GiveBack(const std::string& key, const std::string& lease) = 0;

 protected:
  ~PlaceKeeper() = default;
};

// Holds one place; movable, gives it back on destruction or Release().
class InflightGuard {
 public:
  InflightGuard() = default;
  InflightGuard(std::weak_ptr<PlaceKeeper> keeper, std::string key, std::string lease = {})
      : keeper_(std::move(keeper)), key_(std::move(key)), lease_(std::move(lease)) {}
  InflightGuard(InflightGuard&& other) noexcept = default;
  InflightGuard& operator=(InflightGuard&& other) noexcept;
  InflightGuard(const InflightGuard&) = delete;
  InflightGuard& operator=(const InflightGuard&) = delete;
  ~InflightGuard() { Release(); }
  void Release();
  bool held() const { return !keeper_.expired(); }

 private:
  std::weak_ptr<PlaceKeeper> keeper_;
  std::string key_;
  std::string lease_;
};

class InflightTable {
 public:
  InflightTable();
  // A place for `key` when fewer than `max` are held; nullopt otherwise.
  std::optional<InflightGuard> TryAcquire(std::string_view key, std::int64_t max);
  // Likewise; `held_before` is the count the request found.
  std::optional<InflightGuard> TryAcquire(std::string_view key, std::int64_t max,
                                          std::int64_t& held_before);
  std::int64_t Count(std::string_view key);
  std::size_t KeyCount();  // keys with at least one request in flight

 private:
  struct Keeper;
  void Release(const std::string& key);
  static constexpr std::size_t kShards = 16;
  struct Shard {
    std::mutex mutex;
    std::unordered_map<std::string, std::int64_t> counts;
  };
  Shard& ShardOf(std::string_view key);
  std::array<Shard, kShards> shards_;
  std::shared_ptr<Keeper> keeper_;  // guards hold it weakly
};

}  // namespace tollgate::store
