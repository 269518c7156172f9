// The fleet of gateways that share one Redis store, as on_error = "share"
// sees it: how many were alive when the membership heartbeat
// (gateway/admin/membership.h) last counted them, and a limit's share for
// one of them; and Redis's clock as the heartbeat last read it. Thread-safe:
// set by the heartbeat, read by every worker's FailoverStore.
#pragma once

#include <atomic>
#include <cstdint>

#include "base/clock.h"
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

// How far Redis's clock (TIME, in Unix ms: what the scripts decide on with
// time = "server") is ahead of a gateway's Clock::NowMs(), as the last
// heartbeat measured it. Before the first, the Clock's own Unix time stands
// in for Redis's.
class RedisClockOffset {
 public:
  // `redis_ms`: Redis's TIME in a reply that arrived at `local_ms`.
  void Learn(std::int64_t redis_ms, std::int64_t local_ms) {
    offset_ms_.store(redis_ms - local_ms, std::memory_order_relaxed);
    known_.store(true, std::memory_order_release);
  }
  std::int64_t Get(const Clock& clock) const {
    if (known_.load(std::memory_order_acquire)) return offset_ms_.load(std::memory_order_relaxed);
    return clock.UnixMs() - clock.NowMs();
  }

 private:
  std::atomic<std::int64_t> offset_ms_{0};
  std::atomic<bool> known_{false};
};

// `base`'s time moved onto Redis's clock: what the local fallback of a
// Redis store with time = "server" decides at, so that its windows begin
// and end where Redis's do (and where the other gateways' fallbacks' do),
// not on each gateway's own scale. Both must outlive it.
class RedisClock final : public Clock {
 public:
  RedisClock(const Clock& base, const RedisClockOffset& offset) : base_(base), offset_(offset) {}
  std::int64_t NowMs() const override { return base_.NowMs() + offset_.Get(base_); }
  std::int64_t UnixMs() const override { return base_.UnixMs(); }

 private:
  const Clock& base_;
  const RedisClockOffset& offset_;
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
