#include "gateway/core/adaptive_limit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace tollgate::gateway {
namespace {

// An upstream with `capacity` workers and a fixed service time: a request
// that finds n in flight takes service × max(1, n / capacity) (the queue
// ahead of it). Time is simulated in steps; `demand` clients send back to
// back, each step the gateway lets min(demand, limit) of them through.
struct QueueModel {
  std::int64_t capacity;
  std::int64_t service_us;
  // Each sample is off by up to ± this share of its latency.
  std::int64_t jitter_percent = 0;
  std::int64_t Latency(std::int64_t inflight) const {
    return service_us * std::max<std::int64_t>(capacity, inflight) / capacity;
  }
  std::int64_t Sample(std::int64_t latency, std::uint64_t& seed) const {
    if (jitter_percent == 0) return latency;
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    const auto spread = static_cast<std::int64_t>((seed >> 33) % (2 * jitter_percent + 1));
    return latency * (100 - jitter_percent + spread) / 100;
  }
};

struct RunResult {
  std::int64_t final_limit;
  std::int64_t p99_latency_us;  // over the run's second half
  std::int64_t lowest_limit;    // over the run's second half
};

RunResult Simulate(AdaptiveLimit& limiter, const QueueModel& upstream, std::int64_t demand,
                   std::int64_t steps, std::int64_t& now_ms) {
  std::vector<std::int64_t> latencies;
  std::int64_t lowest = limiter.limit();
  std::uint64_t seed = 1;
  for (std::int64_t step = 0; step < steps; ++step) {
    const std::int64_t inflight = std::min(demand, limiter.limit());
    const std::int64_t latency = upstream.Latency(inflight);
    // Each request in flight completes once per latency; in a 10 ms step
    // that is inflight × 10 ms ÷ latency completions, at least one.
    const std::int64_t done = std::max<std::int64_t>(1, inflight * 10'000 / latency);
    for (std::int64_t i = 0; i < done; ++i) {
      limiter.Record(upstream.Sample(latency, seed), inflight, SampleOutcome::kAnswered, now_ms);
    }
    if (step >= steps / 2) {
      latencies.push_back(latency);
      lowest = std::min(lowest, limiter.limit());
    }
    now_ms += 10;
  }
  std::sort(latencies.begin(), latencies.end());
  return {limiter.limit(), latencies[latencies.size() * 99 / 100], lowest};
}

TEST(AdaptiveLimitTest, SettlesNearTheUpstreamsKneeAndKeepsLatencyBounded) {
  AdaptiveLimitParams params;
  params.max_limit = 1000;
  AdaptiveLimit limiter(params);
  std::int64_t now = 0;
  const QueueModel upstream{50, 20'000};
  const RunResult r = Simulate(limiter, upstream, 500, 6000, now);
  // The knee is 50 in flight; a fixed limit of 500 would give 10× the
  // service time.
  EXPECT_GE(r.final_limit, 40);
  EXPECT_LE(r.final_limit, 100);
  EXPECT_LE(r.p99_latency_us, 2 * upstream.service_us);
  EXPECT_GE(upstream.Latency(500), 10 * upstream.service_us);
}

TEST(AdaptiveLimitTest, NoisyLatencyStillSettlesNearTheKnee) {
  AdaptiveLimitParams params;
  AdaptiveLimit limiter(params);
  std::int64_t now = 0;
  const QueueModel upstream{50, 20'000, 30};
  const RunResult r = Simulate(limiter, upstream, 500, 8000, now);
  EXPECT_GE(r.final_limit, 40);
  EXPECT_LE(r.final_limit, 100);
  EXPECT_LE(r.p99_latency_us, 2 * upstream.service_us);
}

TEST(AdaptiveLimitTest, RisesAgainWhenTheUpstreamGetsFaster) {
  AdaptiveLimitParams params;
  AdaptiveLimit limiter(params);
  std::int64_t now = 0;
  const RunResult slow = Simulate(limiter, {50, 20'000}, 500, 6000, now);
  const RunResult fast = Simulate(limiter, {200, 20'000}, 500, 12000, now);
  EXPECT_LE(slow.final_limit, 100);
  EXPECT_GE(fast.final_limit, 160);
  EXPECT_LE(fast.p99_latency_us, 2 * 20'000);
}

TEST(AdaptiveLimitTest, AdaptsWhenTheUpstreamGetsSlowerForGood) {
  AdaptiveLimitParams params;
  AdaptiveLimit limiter(params);
  std::int64_t now = 0;
  Simulate(limiter, {50, 10'000}, 500, 4000, now);
  const std::int64_t fast_reference = limiter.min_latency_us();
  // Four times slower, for longer than the horizon: the reference follows.
  const RunResult slower = Simulate(limiter, {50, 40'000}, 500, 8000, now);
  EXPECT_GT(limiter.min_latency_us(), 2 * fast_reference);
  EXPECT_GE(slower.final_limit, 35);
  EXPECT_LE(slower.final_limit, 100);
}

TEST(AdaptiveLimitTest, NoCollapseOfTheLimitWhileTheReferenceIsRemeasured) {
  // Envoy pins concurrency to re-measure its minimum, refusing the rest.
  // Here the reference ages out window by window: over a long steady run
  // the limit never drops far below the knee.
  AdaptiveLimitParams params;
  AdaptiveLimit limiter(params);
  std::int64_t now = 0;
  Simulate(limiter, {50, 20'000}, 500, 3000, now);
  const RunResult steady = Simulate(limiter, {50, 20'000}, 500, 20000, now);
  EXPECT_GE(steady.lowest_limit, 30);
}

TEST(AdaptiveLimitTest, DoesNotGrowWhenTheLimitIsNotTheBound) {
  AdaptiveLimitParams params;
  params.initial_limit = 100;
  AdaptiveLimit limiter(params);
  std::int64_t now = 0;
  // Ten clients never fill a limit of 100: latency is flat, the limit stays.
  const RunResult r = Simulate(limiter, {1000, 20'000}, 10, 5000, now);
  EXPECT_EQ(r.final_limit, 100);
}

TEST(AdaptiveLimitTest, StaysWithinItsBounds) {
  AdaptiveLimitParams params;
  params.min_limit = 5;
  params.max_limit = 30;
  AdaptiveLimit limiter(params);
  std::int64_t now = 0;
  EXPECT_EQ(Simulate(limiter, {1000, 20'000}, 5000, 4000, now).final_limit, 30);
  EXPECT_EQ(Simulate(limiter, {1, 20'000}, 5000, 4000, now).lowest_limit, 5);
}

TEST(AdaptiveLimitTest, DropsBackOffAndAreNotSamples) {
  AdaptiveLimitParams params;
  params.initial_limit = 100;
  params.smoothing = 1.0;
  AdaptiveLimit limiter(params);
  std::int64_t now = 0;
  // A timeout with a huge "latency" is a drop: the limit goes to 90, and
  // the reference is not poisoned by it.
  limiter.Record(5'000'000, 100, SampleOutcome::kDropped, now);
  now += params.window_ms;
  limiter.Record(5'000'000, 100, SampleOutcome::kDropped, now);
  EXPECT_EQ(limiter.limit(), 90);
  EXPECT_EQ(limiter.min_latency_us(), 0);
  // Refused or abandoned exchanges change nothing.
  for (int i = 0; i < 1000; ++i) {
    now += params.window_ms;
    limiter.Record(1, 1, SampleOutcome::kIgnored, now);
  }
  EXPECT_EQ(limiter.limit(), 90);
}

TEST(AdaptiveLimitTest, DropsBackOffAtOnceWhateverTheSmoothing) {
  // Smoothing is for latency's noisy gradient; timeouts say more: a window
  // with drops takes the whole back-off.
  AdaptiveLimitParams params;
  params.initial_limit = 100;
  AdaptiveLimit limiter(params);
  std::int64_t now = 0;
  limiter.Record(5'000'000, 100, SampleOutcome::kDropped, now);
  now += params.window_ms;
  limiter.Record(5'000'000, 100, SampleOutcome::kDropped, now);
  EXPECT_EQ(limiter.limit(), 90);
}

TEST(AdaptiveLimitTest, TargetLatencyReplacesTheReference) {
  AdaptiveLimitParams params;
  params.target_latency_us = 30'000;
  AdaptiveLimit limiter(params);
  std::int64_t now = 0;
  // Latency = 20 ms × n / 50: the target of 30 ms is met at 75 in flight.
  const RunResult r = Simulate(limiter, {50, 20'000}, 500, 6000, now);
  EXPECT_GE(r.final_limit, 60);
  EXPECT_LE(r.final_limit, 90);
}

TEST(AdaptiveLimitTest, AReferenceTakenAboveTheKneeIsCorrectedByProbes) {
  // Started far above the knee, the first windows' latency is queueing:
  // the probes at half the limit find lower latencies window by window.
  AdaptiveLimitParams params;
  params.initial_limit = 400;
  AdaptiveLimit limiter(params);
  std::int64_t now = 0;
  const RunResult r = Simulate(limiter, {50, 20'000}, 500, 30000, now);
  EXPECT_LE(r.final_limit, 100);
  EXPECT_GE(r.final_limit, 30);
}

TEST(AdaptiveLimitTest, AProbeRunsOneWindowAtHalfTheLimit) {
  AdaptiveLimitParams params;
  params.initial_limit = 100;
  params.probe_interval_ms = 1000;
  params.window_ms = 100;
  params.min_samples = 1;
  AdaptiveLimit limiter(params);
  std::int64_t now = 0;
  // Latency flat at the reference: the limit creeps up, except for the
  // probe's one window in the 1.5 s.
  struct Drop {
    std::int64_t before, after;
  };
  std::vector<Drop> drops;
  std::int64_t after_probe = 0;
  for (int i = 0; i < 30; ++i) {
    const std::int64_t before = limiter.limit();
    limiter.Record(20'000, limiter.limit(), SampleOutcome::kAnswered, now);
    if (limiter.limit() < before) drops.push_back({before, limiter.limit()});
    if (drops.size() == 1 && limiter.limit() > drops[0].after) after_probe = limiter.limit();
    now += 50;
  }
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_GE(drops[0].after * 2, drops[0].before);
  EXPECT_LE(drops[0].after * 2, drops[0].before + 20);
  EXPECT_GE(after_probe, drops[0].before);
}

}  // namespace
}  // namespace tollgate::gateway
