// An upstream's concurrency limit found from its latency (`concurrency =
// "adaptive"` on an [[upstreams]] entry): a gradient controller in the
// spirit of Envoy's adaptive_concurrency filter, with its known failure
// modes designed out (docs/protecting-upstreams.md explains each):
//  - the reference latency is the lowest window median over a sliding
//    horizon (a median compared with medians, not with the luckiest
//    sample), so a lasting slow-down ages out of it; and so that it cannot
//    drift up with a queue that never drains, one window in every
//    probe_interval_ms runs at half the limit instead of Envoy's pinned
//    minimum concurrency: a dip, not a burst of refusals;
//  - only exchanges the upstream answered are latency samples; refused,
//    cancelled and timed-out ones are not (a timeout counts as a drop, which
//    lowers the limit multiplicatively instead);
//  - the limit rises only when it was the bound (at least half of it in use
//    during the window), so a constant queueing term cannot grow it without
//    bound, and it moves by a smoothed step, within [min, max].
//
// Latencies in microseconds, times in milliseconds of the injected clock
// (the caller passes `now_ms`). Thread-safe: one controller per upstream is
// shared by every worker; a sample takes a mutex for a few instructions.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

namespace tollgate::gateway {

struct AdaptiveLimitParams {
  std::int64_t min_limit = 1;
  std::int64_t max_limit = 1000;
  std::int64_t initial_limit = 16;
  // A window closes once this long has passed and it holds min_samples.
  std::int64_t window_ms = 250;
  std::int64_t min_samples = 50;
  // How far back the minimum latency reaches.
  std::int64_t min_rtt_horizon_ms = 30'000;
  // The latency the controller aims at: the reference × (1 + tolerance),
  // or target_latency_us when set (> 0).
  double tolerance = 0.1;
  std::int64_t target_latency_us = 0;
  // Share of the computed step taken per window (1: all of it).
  double smoothing = 0.2;
  // Factor the limit is multiplied by after a window with drops.
  double backoff = 0.9;
  // How often a window runs at probe_share of the limit to re-measure the
  // reference latency with less queueing (0: never).
  std::int64_t probe_interval_ms = 15'000;
  double probe_share = 0.5;
};

// How an exchange with the upstream ended, for the controller.
enum class SampleOutcome {
  kAnswered,  // the upstream answered: its latency is a sample
  kDropped,   // timed out or reset by the upstream: a sign of overload
  kIgnored,   // refused before it reached the upstream, or the client left
};

class AdaptiveLimit {
 public:
  explicit AdaptiveLimit(const AdaptiveLimitParams& params);

  // The current limit; lock-free.
  std::int64_t limit() const { return limit_.load(std::memory_order_relaxed); }
  // The reference latency: the lowest window median within the horizon
  // (µs; 0 before the first window closed).
  std::int64_t min_latency_us() const;

  // One ended exchange: its latency (how long it held its place: from
  // sending the request to the end of the response) and how many
  // exchanges were in flight when it started (itself included).
  void Record(std::int64_t latency_us, std::int64_t inflight, SampleOutcome outcome,
              std::int64_t now_ms);

 private:
  void CloseWindow(std::int64_t now_ms);  // mutex_ held

  const AdaptiveLimitParams params_;
  std::atomic<std::int64_t> limit_;
  mutable std::mutex mutex_;
  // The window being filled.
  std::int64_t window_start_ms_ = -1;
  std::vector<std::int64_t> samples_;  // at most kMaxSamples
  std::int64_t max_inflight_ = 0;
  std::int64_t drops_ = 0;
  // Window medians with their window's end, oldest first, within the
  // horizon.
  struct WindowMin {
    std::int64_t end_ms;
    std::int64_t latency_us;
  };
  std::vector<WindowMin> minima_;
  double limit_exact_;  // the limit before rounding, so small steps add up
  // The window being filled runs at probe_share of limit_exact_.
  bool probing_ = false;
  std::int64_t next_probe_ms_ = -1;
};

}  // namespace tollgate::gateway
