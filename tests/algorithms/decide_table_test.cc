// Table tests: each formula of docs/algorithms.md at its edges.
#include <gtest/gtest.h>

#include <vector>

#include "algorithms/decide.h"
#include "algorithms/state.h"

namespace tollgate::algorithms {
namespace {

constexpr std::int64_t kYearMs = 365LL * 24 * 3600 * 1000;

// Drives one key through a sequence of requests.
class Key {
 public:
  explicit Key(std::vector<LimitParams> windows, std::int64_t t0 = 0)
      : windows_(std::move(windows)), state_(windows_, t0) {}
  Decision At(std::int64_t t, std::int64_t cost = 1) {
    return Decide(windows_, state_.windows(), t, cost);
  }

 private:
  std::vector<LimitParams> windows_;
  OwnedState state_;
};

LimitParams Params(Algorithm a, std::int64_t limit, std::int64_t window_ms, std::int64_t burst = 0,
                   std::int64_t sub_windows = 10) {
  return {a, limit, window_ms, burst, sub_windows, Shaping::kDelay};
}

void ExpectDecision(const Decision& d, bool allowed, std::int64_t remaining, std::int64_t retry,
                    std::int64_t delay = 0) {
  EXPECT_EQ(d.allowed, allowed);
  EXPECT_EQ(d.remaining, remaining);
  EXPECT_EQ(d.retry_after_ms, retry);
  EXPECT_EQ(d.delay_ms, delay);
}

TEST(FixedWindow, WindowBoundaries) {
  Key key({Params(Algorithm::kFixedWindow, 3, 1000)});
  ExpectDecision(key.At(999), true, 2, 0);
  ExpectDecision(key.At(999), true, 1, 0);
  ExpectDecision(key.At(999), true, 0, 0);
  ExpectDecision(key.At(999), false, 0, 1);  // (idx+1)*W - t at t = idx*W - 1
  EXPECT_EQ(key.At(999).reset_ms, 1);
  ExpectDecision(key.At(1000), true, 2, 0);  // t = idx*W: a fresh window
  EXPECT_EQ(key.At(1000).reset_ms, 1000);
}

TEST(FixedWindow, CostAboveOneIsAllOrNothing) {
  Key key({Params(Algorithm::kFixedWindow, 5, 100)});
  ExpectDecision(key.At(10, 3), true, 2, 0);
  ExpectDecision(key.At(20, 3), false, 2, 80);
  ExpectDecision(key.At(20, 2), true, 0, 0);
}

TEST(FixedWindow, LimitOneAndHugeWindow) {
  const std::int64_t huge = std::int64_t{1} << 40;
  Key key({Params(Algorithm::kFixedWindow, 1, huge)});
  ExpectDecision(key.At(5), true, 0, 0);
  ExpectDecision(key.At(6), false, 0, huge - 6);
  ExpectDecision(key.At(huge), true, 0, 0);
}

TEST(SlidingLog, WindowIsHalfOpen) {
  Key key({Params(Algorithm::kSlidingLog, 2, 1000)});
  ExpectDecision(key.At(0), true, 1, 0);
  ExpectDecision(key.At(500), true, 0, 0);
  ExpectDecision(key.At(600), false, 0, 400);  // log[0] + W - t
  ExpectDecision(key.At(999), false, 0, 1);
  ExpectDecision(key.At(1000), true, 0, 0);  // ts 0 <= t - W leaves
  EXPECT_EQ(key.At(1000).reset_ms, 1000);
}

TEST(SlidingLog, CostUsesTheKthOldest) {
  Key key({Params(Algorithm::kSlidingLog, 4, 100)});
  key.At(0);
  key.At(10);
  key.At(20);
  // n = 3, c = 3 -> k = 2: log[1] = 10 leaves at 110.
  ExpectDecision(key.At(30, 3), false, 1, 80);
  ExpectDecision(key.At(110, 3), true, 0, 0);
}

TEST(SlidingLog, LogGoesToTheHeapAndComesBackInline) {
  Key key({Params(Algorithm::kSlidingLog, 3, 100)});
  ExpectDecision(key.At(0), true, 2, 0);   // one run: kept inline
  ExpectDecision(key.At(0), true, 1, 0);   // same timestamp: same run
  ExpectDecision(key.At(10), true, 0, 0);  // second run: the log moves to the heap
  ExpectDecision(key.At(50), false, 0, 50);
  ExpectDecision(key.At(100), true, 1, 0);  // the run at 0 (2 units) leaves
  ExpectDecision(key.At(300), true, 2, 0);  // everything left: inline again
  ExpectDecision(key.At(250), true, 1, 0);  // a clock stepping back joins the newest run
  ExpectDecision(key.At(399), true, 0, 0);
  ExpectDecision(key.At(399), false, 0, 1);  // ... so it leaves with it, at 300 + W
}

TEST(SubWindow, OneSubWindowIsAFixedWindow) {
  Key key({Params(Algorithm::kSubWindow, 2, 100, 0, 1)});
  ExpectDecision(key.At(0), true, 1, 0);
  ExpectDecision(key.At(99), true, 0, 0);
  ExpectDecision(key.At(99), false, 0, 1);
  ExpectDecision(key.At(100), true, 1, 0);
}

TEST(SubWindow, SubWindowsEqualToWindow) {
  Key key({Params(Algorithm::kSubWindow, 2, 10, 0, 10)});
  ExpectDecision(key.At(0), true, 1, 0);
  ExpectDecision(key.At(3), true, 0, 0);
  ExpectDecision(key.At(9), false, 0, 1);  // sub-window 0 leaves at 10
  ExpectDecision(key.At(10), true, 0, 0);
  ExpectDecision(key.At(12), false, 0, 1);  // sub-window 3 leaves at 13
}

TEST(SubWindow, WalksSubWindowsUntilEnoughLeave) {
  Key key({Params(Algorithm::kSubWindow, 4, 100, 0, 4)});  // S = 25
  key.At(0);
  key.At(30);
  key.At(60, 2);
  // total 4; c = 2 needs 2 gone: j=0 leaves at 100 (total 3), j=1 at 125 (total 2).
  ExpectDecision(key.At(70, 2), false, 0, 55);
}

TEST(SubWindow, CountsSaturateAboveTheLimitWhenTheClockStepsBack) {
  // L < 65535: 16-bit counts. With the newest sub-window at 3 (t = 150),
  // requests at t = 10 see an empty window and are counted into sub-window 3.
  Key key({Params(Algorithm::kSubWindow, 3, 100, 0, 2)});  // S = 50
  key.At(150);
  for (int i = 0; i < 70'000; ++i) ASSERT_TRUE(key.At(10).allowed);
  const Decision d = key.At(150);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_ms, 100);  // sub-window 3 leaves at (3 + 2) * 50
  EXPECT_TRUE(key.At(250).allowed);
}

TEST(TwoBucket, InterpolatesThePreviousWindow) {
  Key key({Params(Algorithm::kTwoBucket, 10, 1000)});
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(key.At(500).allowed);
  ExpectDecision(key.At(500), false, 0, 600);  // passes at 1100, see below
  // t = 1000: prev = 10, e = 0 -> 1000 + 10*1000 > 10000; at 1100: 1000 + 9000 = 10000.
  ExpectDecision(key.At(1000), false, 0, 100);
  ExpectDecision(key.At(1100), true, 0, 0);
  EXPECT_EQ(key.At(1100).reset_ms, 1900);
  // t = 1550: prev weight 450/1000 of 10 = 4.5, curr = 1: floor(5.5) - 1 = 4.
  EXPECT_EQ(key.At(1550).remaining, 3);
}

TEST(TokenBucket, BurstRefillAndRetry) {
  Key key({Params(Algorithm::kTokenBucket, 1, 1000, 1)});
  ExpectDecision(key.At(0), true, 0, 0);
  ExpectDecision(key.At(1), false, 0, 999);
  ExpectDecision(key.At(1000), true, 0, 0);
  EXPECT_EQ(key.At(1000).reset_ms, 1000);
}

TEST(TokenBucket, CostAboveOne) {
  Key key({Params(Algorithm::kTokenBucket, 10, 1000, 10)});
  ExpectDecision(key.At(0, 4), true, 6, 0);
  ExpectDecision(key.At(0, 4), true, 2, 0);
  ExpectDecision(key.At(0, 4), false, 2, 200);  // ceil((4000 - 2000) / 10)
}

TEST(TokenBucket, IdleForAYearDoesNotOverflow) {
  Key key({Params(Algorithm::kTokenBucket, 1000000, 1, 5)});
  key.At(0, 5);
  ExpectDecision(key.At(kYearMs), true, 4, 0);
  ExpectDecision(key.At(2 * kYearMs, 5), true, 0, 0);
}

TEST(LeakyBucket, BurstZeroSpacesRequests) {
  Key key({Params(Algorithm::kLeakyBucket, 1, 100, 0)});
  ExpectDecision(key.At(0), true, 0, 0);
  ExpectDecision(key.At(50), false, 0, 50);
  ExpectDecision(key.At(100), true, 0, 0);
}

TEST(LeakyBucket, ShapingDelaysQueuedRequests) {
  Key key({Params(Algorithm::kLeakyBucket, 1, 100, 2)});
  ExpectDecision(key.At(0), true, 2, 0, 0);
  ExpectDecision(key.At(0), true, 1, 0, 100);
  ExpectDecision(key.At(0), true, 0, 0, 200);
  ExpectDecision(key.At(0), false, 0, 100);
  EXPECT_EQ(key.At(0).reset_ms, 300);
}

TEST(LeakyBucket, NoDelayPolices) {
  LimitParams p = Params(Algorithm::kLeakyBucket, 1, 100, 2);
  p.shaping = Shaping::kNoDelay;
  Key key({p});
  ExpectDecision(key.At(0), true, 2, 0, 0);
  ExpectDecision(key.At(0), true, 1, 0, 0);
}

TEST(LeakyBucket, IdleForAYear) {
  Key key({Params(Algorithm::kLeakyBucket, 7, 3, 4)});
  key.At(0, 5);
  ExpectDecision(key.At(kYearMs, 5), true, 0, 0, 2);  // ceil((5*3 - 3) / 7)
}

TEST(MultiWindow, AllOrNothing) {
  Key key({Params(Algorithm::kFixedWindow, 2, 100), Params(Algorithm::kFixedWindow, 3, 1000)});
  ExpectDecision(key.At(0), true, 1, 0);
  ExpectDecision(key.At(10), true, 0, 0);
  ExpectDecision(key.At(20), false, 0, 80);
  ExpectDecision(key.At(100), true, 0, 0);  // the hour-like window now has 3
  // The 1000ms window limits alone: its retry wins.
  ExpectDecision(key.At(150), false, 0, 850);
  // The short window alone would allow at 200, but the long one still limits.
  ExpectDecision(key.At(200), false, 0, 800);
}

TEST(MultiWindow, LimitedByOneConsumesNone) {
  Key key({Params(Algorithm::kSlidingLog, 5, 100), Params(Algorithm::kSlidingLog, 1, 10)});
  EXPECT_TRUE(key.At(0).allowed);
  EXPECT_FALSE(key.At(5).allowed);
  // Had the 100ms window consumed at t=5, only 3 more would pass below.
  int allowed = 0;
  for (std::int64_t t = 10; t < 100; t += 10) allowed += key.At(t).allowed ? 1 : 0;
  EXPECT_EQ(allowed, 4);
}

}  // namespace
}  // namespace tollgate::algorithms
