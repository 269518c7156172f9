// The units this gateway has reserved for requests whose responses have
// not ended yet, by store key (token budgets: gateway/core/settlement.h):
// what the admin API shows as a key's reserved-but-unsettled units. A key
// is held only while some of its reservations are in flight, so memory
// follows the requests in flight, not the keys seen. Thread-safe (one
// mutex; two short holds per exchange that settles, none otherwise).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace tollgate::gateway {

class ReservationLedger {
 public:
  // `units` of `key` reserved for a request in flight, then given back by
  // Remove when its response has ended (settled or not).
  void Add(std::string_view key, std::int64_t units);
  void Remove(std::string_view key, std::int64_t units);
  // The units of `key` in flight now (0 when none).
  std::int64_t InFlight(std::string_view key) const;
  std::size_t keys() const;

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::int64_t, Hash, std::equal_to<>> units_;
};

}  // namespace tollgate::gateway
