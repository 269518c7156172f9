// action = "delay": held requests spread over the following windows, the
// waiting room is bounded, and a client that leaves gives its place back.
// Real timers (a steady clock): the assertions are about outcomes, not time.
#include <gtest/gtest.h>

#include <future>
#include <thread>
#include <vector>

#include "test_support.h"

namespace tollgate::testing {
namespace {

std::string DelayRule(const std::string& extra) {
  return BasicConfig(R"(
[[rules]]
name = "queue"
key = "ip"
algorithm = "fixed_window"
limit = 2
window = "300ms"
action = "delay"
)" + extra);
}

TEST(Delay, ThreeTimesTheLimitInOneBurstAllSucceedWithinMaxDelay) {
  auto echo = StartEcho();
  TestGateway gateway(DelayRule("max_delay = \"5s\"\n"), echo->port(), TestClock::kSteady);
  std::vector<std::future<unsigned>> answers;
  for (int i = 0; i < 6; ++i) {
    answers.push_back(std::async(std::launch::async, [&] {
      Client client(gateway.port(), 10000);
      return client.Get("/").result_int();
    }));
  }
  for (auto& a : answers) EXPECT_EQ(a.get(), 200u);
}

TEST(Delay, BeyondMaxDelayIsRejected) {
  auto echo = StartEcho();
  // Two windows of queue cannot fit into 100 ms.
  TestGateway gateway(DelayRule("max_delay = \"100ms\"\n"), echo->port(), TestClock::kSteady);
  std::vector<std::future<unsigned>> answers;
  for (int i = 0; i < 8; ++i) {
    answers.push_back(std::async(std::launch::async, [&] {
      Client client(gateway.port(), 10000);
      return client.Get("/").result_int();
    }));
  }
  int ok = 0;
  int limited = 0;
  for (auto& a : answers) {
    const unsigned status = a.get();
    ok += status == 200;
    limited += status == 429;
  }
  EXPECT_EQ(ok + limited, 8);
  EXPECT_GE(limited, 1);
  EXPECT_GE(ok, 2);
}

TEST(Delay, WaitingRoomIsBoundedAndALeavingClientFreesItsPlace) {
  auto echo = StartEcho();
  TestGateway gateway(DelayRule("max_delay = \"10s\"\nmax_waiting = 1\n"), echo->port(),
                      TestClock::kSteady);
  Client a(gateway.port()), b(gateway.port());
  EXPECT_EQ(a.Get("/").result_int(), 200);
  EXPECT_EQ(b.Get("/").result_int(), 200);
  // The window is used up: the next one waits, the one after finds the room full.
  {
    Client waiting(gateway.port());
    waiting.Send("GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    Client full(gateway.port());
    EXPECT_EQ(full.Get("/").result_int(), 429);
  }  // `waiting` hangs up while it waits
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  Client next(gateway.port(), 10000);
  EXPECT_EQ(next.Get("/").result_int(), 200);
}

}  // namespace
}  // namespace tollgate::testing
