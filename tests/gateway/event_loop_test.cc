// RunEventLoop and store::LoopNow(): one read of the clock per handler on a
// gateway thread, a read per call everywhere else.
#include "gateway/event_loop.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdint>

#include "store/clock.h"
#include "store/loop_time.h"

namespace tollgate::gateway {
namespace {

using SteadyTime = std::chrono::steady_clock::time_point;

// Returns once steady_clock has moved past `t` (nanoseconds, no sleep).
void UntilAfter(SteadyTime t) {
  while (std::chrono::steady_clock::now() <= t) {
  }
}

TEST(EventLoop, OutsideItEveryReadIsFresh) {
  const SteadyTime first = store::LoopNow();
  UntilAfter(first);
  EXPECT_GT(store::LoopNow(), first);
}

TEST(EventLoop, AHandlerSeesOneTimeAndTheNextOneALaterTime) {
  boost::asio::io_context io;
  SteadyTime first{};
  SteadyTime again{};
  SteadyTime next{};
  boost::asio::post(io, [&] {
    first = store::LoopNow();
    UntilAfter(first);
    again = store::LoopNow();
  });
  boost::asio::post(io, [&] { next = store::LoopNow(); });
  EXPECT_EQ(RunEventLoop(io), 2u);
  EXPECT_EQ(again, first);
  EXPECT_GT(next, first);
  // The loop has returned: reads are fresh again.
  const SteadyTime after = store::LoopNow();
  UntilAfter(after);
  EXPECT_GT(store::LoopNow(), after);
}

TEST(EventLoop, TheSteadyClockReadsThroughIt) {
  boost::asio::io_context io;
  const store::SteadyClock clock;
  store::Instant a{};
  store::Instant b{};
  std::int64_t b_ms = 0;
  boost::asio::post(io, [&] {
    a = clock.Now();
    UntilAfter(a.steady + std::chrono::milliseconds(2));
    b = clock.Now();
    b_ms = clock.NowMs();
  });
  RunEventLoop(io);
  EXPECT_EQ(b.steady, a.steady);
  EXPECT_EQ(b.ms, a.ms);
  EXPECT_EQ(b_ms, a.ms);
  EXPECT_GE(clock.NowMs(), a.ms + 2);  // outside the loop: the clock itself
}

}  // namespace
}  // namespace tollgate::gateway
