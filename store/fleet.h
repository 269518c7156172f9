// The fleet of gateways that share one Redis store, as on_error = "share"
// sees it: how many were alive when the membership heartbeat
// (gateway/ops/membership.h) last counted them, and a limit's share for
// one of them. Thread-safe: set by the heartbeat, read by every worker's
// FailoverStore.
#pragma once

#include <atomic>
#include <cstdint>

#include "store/store.h"

namespace tollgate::store {

class FleetSize {
 public:
  // At least 1: a gateway counts itself before its first heartbeat lands.
  std::int64_t Get() const { return gateways_.load(std::memory_order_relaxed); }
  void Set(std::int64_t gateways) {
    gateways_.store(gateways < 1 ? 1 : gateways, std::memory_order_relaxed);
  }

 private:
  std::atomic<std::int64_t> gateways_{1};
};

// `spec`'s windows with every limit and every token bucket's burst divided
// by `gateways` (rounded down, at least 1), and every leaky bucket's
// capacity (burst + 1; the burst at least 0): what one of `gateways`
// gateways deciding alone may admit so that together they stay within
// `spec`. A limit or burst below `gateways` cannot be divided and stays at
// 1 per gateway: then the fleet admits up to `gateways` where `spec` says
// less. Its own fingerprint: the share's state is not the shared limit's.
// Preconditions: `gateways` >= 1.
LimitSpec ShareOf(const LimitSpec& spec, std::int64_t gateways);

}  // namespace tollgate::store
