// Settling a reservation (algorithms/settle.h) against docs/algorithms.md,
// "Settling a reservation": refunds, charges into debt, windows that rolled
// over, and the bounds at the edges of what the configuration accepts.
#include "algorithms/settle.h"

#include <gtest/gtest.h>

#include <limits>

#include "algorithms/decide.h"
#include "algorithms/state.h"
#include "algorithms/validate.h"
#include "tests/algorithms/extreme_limits.h"

namespace tollgate::algorithms {
namespace {

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

LimitParams Params(Algorithm algorithm, std::int64_t limit, std::int64_t window_ms,
                   std::int64_t burst = 0, std::int64_t sub_windows = 10) {
  LimitParams p;
  p.algorithm = algorithm;
  p.limit = limit;
  p.window_ms = window_ms;
  p.burst = burst;
  p.sub_windows = sub_windows;
  p.shaping = Shaping::kNoDelay;
  return p;
}

// One window's state on the heap.
struct Key {
  explicit Key(const LimitParams& params, std::int64_t now_ms = 0)
      : p(params), owned(std::span<const LimitParams>(&p, 1), now_ms) {}
  std::byte* s() { return owned.windows()[0]; }
  Decision Decide(std::int64_t t, std::int64_t cost) { return algorithms::Decide(p, s(), t, cost); }
  Decision Settle(std::int64_t reserved_at, std::int64_t t, std::int64_t reserved,
                  std::int64_t actual) {
    return algorithms::Settle(p, s(), reserved_at, t, reserved, actual);
  }
  WindowView View(std::int64_t t) { return Inspect(p, s(), t); }
  LimitParams p;
  OwnedState owned;
};

TEST(Settle, OnlySlidingLogCannotSettle) {
  for (int a = 0; a < kAlgorithmCount; ++a) {
    const auto algorithm = static_cast<Algorithm>(a);
    EXPECT_EQ(CanSettle(algorithm), algorithm != Algorithm::kSlidingLog)
        << AlgorithmName(algorithm);
  }
}

// ---- token_bucket -------------------------------------------------------

TEST(SettleTokenBucket, RefundGivesTokensBackButNeverBeyondCapacity) {
  Key k(Params(Algorithm::kTokenBucket, 10, 1000, 100));
  ASSERT_TRUE(k.Decide(0, 80).allowed);
  EXPECT_EQ(k.View(0).remaining, 20);
  const Decision d = k.Settle(0, 0, 80, 30);  // 50 back
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 70);
  EXPECT_EQ(d.reset_ms, 3000);  // 30 tokens at 10 per 1000 ms
  // Later, the bucket has refilled meanwhile: a refund stops at full.
  ASSERT_TRUE(k.Decide(0, 20).allowed);                // 50 left
  EXPECT_EQ(k.Settle(0, 4000, 20, 0).remaining, 100);  // 50 + 40 refilled + 20 > 100
  EXPECT_EQ(k.View(4000).level, 100 * 1000);
}

TEST(SettleTokenBucket, ChargeBeyondTheReservationIsDebtThatLaterRequestsWaitOff) {
  Key k(Params(Algorithm::kTokenBucket, 10, 1000, 100));
  ASSERT_TRUE(k.Decide(0, 100).allowed);
  const Decision d = k.Settle(0, 0, 100, 130);  // 30 tokens of debt
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.retry_after_ms, 3100);  // (1 + 30) tokens at 10 per second
  EXPECT_EQ(d.reset_ms, 13000);       // 130 tokens to full
  EXPECT_EQ(k.View(0).level, -30 * 1000);
  const Decision refused = k.Decide(3099, 1);
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.retry_after_ms, 1);
  EXPECT_EQ(refused.remaining, 0);
  EXPECT_TRUE(k.Decide(3100, 1).allowed);
  // Back to full after the debt and the capacity have refilled.
  EXPECT_EQ(k.View(13000 + 100).remaining, 100);
}

TEST(SettleTokenBucket, DebtIsAtMostOneCapacity) {
  Key k(Params(Algorithm::kTokenBucket, 10, 1000, 100));
  ASSERT_TRUE(k.Decide(0, 100).allowed);
  k.Settle(0, 0, 100, kInt64Max);
  EXPECT_EQ(k.View(0).level, -100 * 1000);
  k.Settle(0, 0, 0, 50);  // already a capacity below empty
  EXPECT_EQ(k.View(0).level, -100 * 1000);
  // A key idle far longer than the clamp is full again.
  EXPECT_EQ(k.View(kMaxTimeMs).remaining, 100);
}

// ---- leaky_bucket -------------------------------------------------------

TEST(SettleLeakyBucket, RefundEmptiesTheQueueChargeQueuesMore) {
  LimitParams p = Params(Algorithm::kLeakyBucket, 1, 100, 4);
  p.shaping = Shaping::kDelay;
  Key k(p);
  ASSERT_TRUE(k.Decide(0, 5).allowed);  // full: 5 queued
  EXPECT_EQ(k.Settle(0, 0, 5, 2).remaining, 3);
  EXPECT_EQ(k.View(0).level, 200);
  // A refund never leaves the queue below empty.
  k.Settle(0, 0, 5, 0);
  EXPECT_EQ(k.View(0).level, 0);
  ASSERT_TRUE(k.Decide(0, 5).allowed);
  const Decision d = k.Settle(0, 0, 5, 8);  // 3 beyond the queue
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.retry_after_ms, 400);  // level 800 must drain to 400
  EXPECT_EQ(d.reset_ms, 800);
  const Decision later = k.Decide(400, 1);
  EXPECT_TRUE(later.allowed);
  EXPECT_EQ(later.delay_ms, 400);  // it waits behind the debt
}

TEST(SettleLeakyBucket, DebtIsAtMostOneCapacityBeyondFull) {
  Key k(Params(Algorithm::kLeakyBucket, 1, 100, 4));
  ASSERT_TRUE(k.Decide(0, 5).allowed);
  k.Settle(0, 0, 5, 1'000'000);
  EXPECT_EQ(k.View(0).level, 2 * 5 * 100);
}

// ---- fixed_window -------------------------------------------------------

TEST(SettleFixedWindow, RefundToTheCountedWindowAndDroppedAfterIt) {
  Key k(Params(Algorithm::kFixedWindow, 100, 1000));
  ASSERT_TRUE(k.Decide(10, 60).allowed);
  EXPECT_EQ(k.Settle(10, 500, 60, 20).remaining, 80);
  ASSERT_TRUE(k.Decide(600, 60).allowed);  // 80 counted
  // The window the reservation was counted in is over: nothing back.
  const Decision d = k.Settle(600, 1000, 60, 0);
  EXPECT_EQ(d.remaining, 100);
  EXPECT_EQ(k.View(1000).level, 0);
  ASSERT_TRUE(k.Decide(1000, 10).allowed);
  k.Settle(600, 1500, 60, 0);
  EXPECT_EQ(k.View(1500).level, 10);
}

TEST(SettleFixedWindow, ChargeCountsAboveTheLimitUpToTwiceIt) {
  Key k(Params(Algorithm::kFixedWindow, 100, 1000));
  ASSERT_TRUE(k.Decide(0, 90).allowed);
  const Decision d = k.Settle(0, 100, 90, 150);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(k.View(100).level, 150);  // the window's count above the limit
  EXPECT_EQ(d.retry_after_ms, 900);
  EXPECT_FALSE(k.Decide(999, 1).allowed);
  EXPECT_TRUE(k.Decide(1000, 100).allowed);
  // A charge whose window is over is counted in the current one.
  k.Settle(500, 1200, 0, 30);
  EXPECT_EQ(k.View(1200).level, 130);
  k.Settle(1200, 1200, 0, kInt64Max);
  EXPECT_EQ(k.View(1200).level, 200);
}

// ---- sub_window ---------------------------------------------------------

TEST(SettleSubWindow, RefundToTheReservationsSubWindowWhileCounted) {
  Key k(Params(Algorithm::kSubWindow, 100, 1000, 0, 10));  // S = 100 ms
  ASSERT_TRUE(k.Decide(50, 40).allowed);                   // sub-window 0
  ASSERT_TRUE(k.Decide(250, 40).allowed);                  // sub-window 2
  EXPECT_EQ(k.Settle(50, 900, 40, 10).remaining, 50);
  // Sub-window 0 is refunded 30: 10 left there, so it leaves at 1000.
  EXPECT_EQ(k.View(1000).level, 40);
  // Once sub-window 2 has left the window, its refund is dropped.
  EXPECT_EQ(k.Settle(250, 1200, 40, 0).remaining, 100);
  EXPECT_EQ(k.View(1200).level, 0);
}

TEST(SettleSubWindow, ChargeGoesToTheReservationsSubWindowOrTheNewest) {
  Key k(Params(Algorithm::kSubWindow, 100, 1000, 0, 10));
  ASSERT_TRUE(k.Decide(50, 90).allowed);
  const Decision d = k.Settle(50, 300, 90, 120);  // into sub-window 0
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(k.View(300).level, 120);
  EXPECT_EQ(d.retry_after_ms, 700);  // when sub-window 0 leaves
  EXPECT_EQ(k.View(1000).level, 0);
  ASSERT_TRUE(k.Decide(1000, 10).allowed);  // sub-window 10
  k.Settle(50, 1100, 90, 100);              // sub-window 0 is over: into sub-window 11
  EXPECT_EQ(k.View(1100).level, 20);
  EXPECT_EQ(k.View(2000).level, 10);
  k.Settle(1100, 1100, 0, kInt64Max);  // the window's total at most 2L
  EXPECT_EQ(k.View(1100).level, 200);
}

TEST(SettleSubWindow, SixteenBitCountsSaturate) {
  Key k(Params(Algorithm::kSubWindow, 60000, 10, 0, 1));
  ASSERT_TRUE(k.Decide(0, 60000).allowed);
  k.Settle(0, 0, 60000, 120000);
  EXPECT_EQ(k.View(0).level, 65535);
}

// ---- two_bucket ---------------------------------------------------------

TEST(SettleTwoBucket, RefundToCurrentOrPreviousWindowDroppedAfter) {
  Key k(Params(Algorithm::kTwoBucket, 100, 1000));
  ASSERT_TRUE(k.Decide(100, 50).allowed);
  k.Settle(100, 200, 50, 30);
  EXPECT_EQ(k.View(200).level, 30);
  // Next window: the reservation is in the previous count.
  k.Settle(100, 1500, 30, 10);
  EXPECT_EQ(k.View(1500).previous, 10);
  EXPECT_EQ(k.View(1500).level, 0);
  // Two windows later it is no longer counted.
  ASSERT_TRUE(k.Decide(2100, 5).allowed);
  k.Settle(100, 2100, 10, 0);
  EXPECT_EQ(k.View(2100).level, 5);
  EXPECT_EQ(k.View(2100).previous, 0);
}

TEST(SettleTwoBucket, ChargeToTheReservationsCountOrTheCurrent) {
  Key k(Params(Algorithm::kTwoBucket, 100, 1000));
  ASSERT_TRUE(k.Decide(100, 50).allowed);
  k.Settle(100, 1200, 50, 80);  // previous window: 50 -> 80
  EXPECT_EQ(k.View(1200).previous, 80);
  k.Settle(0, 3000, 0, 30);  // its window is over: current
  EXPECT_EQ(k.View(3000).level, 30);
  EXPECT_EQ(k.View(3000).previous, 0);
  const Decision d = k.Settle(3000, 3000, 0, kInt64Max);
  EXPECT_EQ(k.View(3000).level, 200);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
}

TEST(Settle, AnyDifferenceOverflowsNothing) {
  // Outside the preconditions too (a reservation above the capacity, a
  // negative actual cost): both are bounded before any product.
  for (int a = 0; a < kAlgorithmCount; ++a) {
    const auto algorithm = static_cast<Algorithm>(a);
    if (!CanSettle(algorithm)) continue;
    Key k(Params(algorithm, 1000, 1000, 1000));
    ASSERT_TRUE(k.Decide(0, 10).allowed);
    k.Settle(0, 0, kInt64Max / 2, 0);
    k.Settle(0, 0, 0, kInt64Max);
    k.Settle(0, 0, 10, -(kInt64Max / 4));
    EXPECT_GE(k.View(0).remaining, 0) << AlgorithmName(algorithm);
  }
}

// ---- several windows ------------------------------------------------------

TEST(Settle, EveryWindowOfALimitSettles) {
  const LimitParams windows[] = {Params(Algorithm::kFixedWindow, 10, 1000),
                                 Params(Algorithm::kFixedWindow, 50, 10000)};
  OwnedState state(windows, 0);
  ASSERT_TRUE(Decide(windows, state.windows(), 0, 8).allowed);
  const Decision d = Settle(windows, state.windows(), 0, 100, 8, 3);
  EXPECT_EQ(d.remaining, 7);
  EXPECT_EQ(d.window, 0);
  EXPECT_EQ(Inspect(windows[1], state.windows()[1], 100).level, 3);
}

// ---- bounds -------------------------------------------------------------

// The extreme shapes of decide_bounds_test.cc: the longest window with the
// smallest limit, the largest limit with a 1 ms window. A settle of any
// actual cost overflows nothing (the sanitizer build checks) and the key is
// fresh again within its reset_ms.
TEST(SettleBounds, ExtremeLimitsAndCostsOverflowNothing) {
  for (int a = 0; a < kAlgorithmCount; ++a) {
    const auto algorithm = static_cast<Algorithm>(a);
    if (!CanSettle(algorithm)) continue;
    for (const LimitParams& p : Extremes(algorithm)) {
      SCOPED_TRACE(::testing::Message() << AlgorithmName(algorithm) << " limit=" << p.limit
                                        << " window_ms=" << p.window_ms);
      ASSERT_EQ(ValidateLimit(p), std::nullopt);
      const std::int64_t capacity = Capacity(p);
      for (const std::int64_t start : {std::int64_t{0}, kMaxTimeMs / 2}) {
        Key k(p, start);
        ASSERT_TRUE(k.Decide(start, capacity).allowed);
        const Decision d = k.Settle(start, start, capacity, kInt64Max);
        EXPECT_FALSE(d.allowed);
        EXPECT_GE(d.retry_after_ms, 1);
        // Fresh again after reset_ms (where that is within the clock's range).
        const std::int64_t fresh_at = start + d.reset_ms;
        if (fresh_at <= kMaxTimeMs) EXPECT_EQ(k.View(fresh_at).remaining, capacity);
      }
    }
  }
}

}  // namespace
}  // namespace tollgate::algorithms
