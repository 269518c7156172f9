// store::LoopNow() and HandlerTime: one reading of the clock per scope, a
// fresh reading per call everywhere else.
#include "base/loop_time.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>

#include "base/clock.h"

namespace tollgate::store {
namespace {

using SteadyTime = std::chrono::steady_clock::time_point;

// Returns once steady_clock has moved past `t` (nanoseconds, no sleep).
void UntilAfter(SteadyTime t) {
  while (std::chrono::steady_clock::now() <= t) {
  }
}

TEST(LoopTime, OutsideAScopeEveryReadIsFresh) {
  const SteadyTime first = LoopNow();
  UntilAfter(first);
  EXPECT_GT(LoopNow(), first);
}

TEST(LoopTime, AScopeSeesOneTimeAndTheNextOneALaterTime) {
  SteadyTime first{};
  SteadyTime again{};
  {
    const HandlerTime scope;
    first = LoopNow();
    UntilAfter(first);
    again = LoopNow();
  }
  EXPECT_EQ(again, first);
  SteadyTime next{};
  {
    const HandlerTime scope;
    next = LoopNow();
  }
  EXPECT_GT(next, first);
}

TEST(LoopTime, NestedScopesShareTheOutermostReadingUntilItEnds) {
  SteadyTime outer{};
  SteadyTime inner{};
  SteadyTime after_inner{};
  {
    const HandlerTime scope;
    outer = LoopNow();
    UntilAfter(outer);
    {
      const HandlerTime nested;
      inner = LoopNow();
    }
    UntilAfter(outer);
    after_inner = LoopNow();
  }
  EXPECT_EQ(inner, outer);
  EXPECT_EQ(after_inner, outer);
  const SteadyTime after = LoopNow();
  EXPECT_GT(after, outer);
  UntilAfter(after);
  EXPECT_GT(LoopNow(), after);
}

TEST(LoopTime, TheSteadyClockReadsThroughIt) {
  const SteadyClock clock;
  Instant a{};
  Instant b{};
  std::int64_t b_ms = 0;
  {
    const HandlerTime scope;
    a = clock.Now();
    UntilAfter(a.steady + std::chrono::milliseconds(2));
    b = clock.Now();
    b_ms = clock.NowMs();
  }
  EXPECT_EQ(b.steady, a.steady);
  EXPECT_EQ(b.ms, a.ms);
  EXPECT_EQ(b_ms, a.ms);
  EXPECT_GE(clock.NowMs(), a.ms + 2);  // outside the scope: the clock itself
}

}  // namespace
}  // namespace tollgate::store
