// Time sources. Everything that needs "now" takes a Clock so tests can drive
// time by hand instead of sleeping.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "base/loop_time.h"

namespace tollgate::store {

// One instant on both scales the gateway keeps per request: the Clock's
// milliseconds (deadlines, rate limits, logs) and steady_clock (metrics'
// sub-millisecond durations, real time whatever the Clock).
struct Instant {
  std::int64_t ms;
  std::chrono::steady_clock::time_point steady;
};

// Time in milliseconds. Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  // A monotonic scale: durations, deadlines, rate-limit state.
  virtual std::int64_t NowMs() const = 0;
  // NowMs() and steady_clock::now() together.
  virtual Instant Now() const { return {NowMs(), std::chrono::steady_clock::now()}; }
  // Wall-clock time since the Unix epoch: token expiry and the like.
  virtual std::int64_t UnixMs() const = 0;
};

// std::chrono::steady_clock in milliseconds since its epoch, read through
// LoopNow() (once per handler in the gateway's event loops).
class SteadyClock final : public Clock {
 public:
  std::int64_t NowMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(LoopNow().time_since_epoch())
        .count();
  }
  // One read of the clock for both scales.
  Instant Now() const override {
    const auto now = LoopNow();
    return {std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count(),
            now};
  }
  std::int64_t UnixMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

// A clock that moves only when told to (tests, replay).
class ManualClock final : public Clock {
 public:
  explicit ManualClock(std::int64_t start_ms = 0) : now_ms_(start_ms) {}
  std::int64_t NowMs() const override { return now_ms_.load(std::memory_order_relaxed); }
  // Both scales move together; tests set a Unix time when it matters.
  std::int64_t UnixMs() const override { return NowMs(); }
  void Set(std::int64_t now_ms) { now_ms_.store(now_ms, std::memory_order_relaxed); }
  void Advance(std::int64_t delta_ms) { now_ms_.fetch_add(delta_ms, std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> now_ms_;
};

}  // namespace tollgate::store
