// action = "delay": held requests spread over the following windows, the
// waiting room is bounded, and a client that leaves gives its place back.
// Real timers (a steady clock): the assertions are about outcomes, not time.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cerrno>
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
  // A frozen clock: the window never rolls over, so the room's state alone
  // decides (the held requests would wait 20 s of real time).
  std::string config = DelayRule("max_delay = \"60s\"\nmax_waiting = 1\n");
  config.replace(config.find("window = \"300ms\""), 16, "window = \"60s\"");
  TestGateway gateway(config, echo->port());
  Client a(gateway.port()), b(gateway.port());
  EXPECT_EQ(a.Get("/").result_int(), 200);
  EXPECT_EQ(b.Get("/").result_int(), 200);
  {
    Client waiting(gateway.port());
    waiting.Send("GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    Client full(gateway.port());
    EXPECT_EQ(full.Get("/").result_int(), 429);  // the one place is taken
  }                                              // `waiting` hangs up while it waits
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // The place is free again: the next request is held, not rejected.
  Client next(gateway.port(), 300);
  next.Send("GET / HTTP/1.1\r\nHost: t\r\n\r\n");
  // A raw recv: SO_RCVTIMEO (300 ms) ends it; Asio's blocking read would poll forever.
  char byte;
  const ssize_t n = ::recv(next.socket().native_handle(), &byte, 1, 0);
  EXPECT_EQ(n, -1) << "an answer came instead of a wait";
  EXPECT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  Client another(gateway.port());
  EXPECT_EQ(another.Get("/").result_int(), 429);  // and it holds the place
}

}  // namespace
}  // namespace tollgate::testing
