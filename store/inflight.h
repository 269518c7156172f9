// Requests in flight per key (rule keys for `max_inflight`, upstream names
// for `max_connections`), counted locally. A request holds an InflightGuard
// from admission to the end of its exchange; the guard gives the place back
// on every path (completion, client abort, upstream error, timeout) because
// it is released by its destructor. Thread-safe: sharded mutexes; a key
// whose count falls to zero is removed, so memory follows the requests in
// flight.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace tollgate::store {

class InflightTable;

// Holds one place of a key; movable, releases on destruction.
class InflightGuard {
 public:
  InflightGuard() = default;
  InflightGuard(InflightTable* table, std::string key) : table_(table), key_(std::move(key)) {}
  InflightGuard(InflightGuard&& other) noexcept
      : table_(std::exchange(other.table_, nullptr)), key_(std::move(other.key_)) {}
  InflightGuard& operator=(InflightGuard&& other) noexcept;
  InflightGuard(const InflightGuard&) = delete;
  InflightGuard& operator=(const InflightGuard&) = delete;
  ~InflightGuard() { Release(); }
  void Release();

 private:
  InflightTable* table_ = nullptr;
  std::string key_;
};

class InflightTable {
 public:
  // A place for `key` when fewer than `max` are held; nullopt otherwise.
  std::optional<InflightGuard> TryAcquire(std::string_view key, std::int64_t max);
  std::int64_t Count(std::string_view key);
  std::size_t KeyCount();  // keys with at least one request in flight

 private:
  friend class InflightGuard;
  void Release(const std::string& key);
  static constexpr std::size_t kShards = 16;
  struct Shard {
    std::mutex mutex;
    std::unordered_map<std::string, std::int64_t> counts;
  };
  Shard& ShardOf(std::string_view key);
  std::array<Shard, kShards> shards_;
};

}  // namespace tollgate::store
