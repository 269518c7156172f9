// Fair waiting rooms (docs/protecting-upstreams.md, "Fair waiting") through
// a real gateway and the echo upstream: requests that wait for a
// max_inflight place or a delay rule's turn take turns fairly between
// clients, by weight and by priority, and a client that leaves gives its
// place in line back. Counts, not times: how many requests one side had
// served while the other had its own.
#include <gtest/gtest.h>

#include <atomic>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "redis_server.h"
#include "test_support.h"

namespace tollgate::testing {
namespace {

enum class Backend { kLocal, kRedis };

std::string BackendName(const ::testing::TestParamInfo<Backend>& info) {
  return info.param == Backend::kLocal ? "Local" : "Redis";
}

// Users and roles from headers sent by the crowd's address.
constexpr const char* kIdentity = R"(
[identity]
trusted_proxies = ["127.0.0.2/32", "127.0.0.3/32", "127.0.0.4/32"]
user_header = "X-User-Id"
role_header = "X-User-Role"
)";

// A rule of `places` places for everyone, waits of up to 20 s, at most
// `max_waiting` of them.
std::string Places(int places, int max_waiting) {
  return "[[rules]]\nname = \"places\"\nkey = \"global\"\nmax_inflight = " +
         std::to_string(places) +
         "\nmax_delay = \"20s\"\nmax_waiting = " + std::to_string(max_waiting) + "\n";
}

// Twenty requests a second for everyone, the rest delayed up to 20 s.
constexpr const char* kTwentyASecond = R"(
[[rules]]
name = "twenty"
key = "global"
algorithm = "token_bucket"
limit = 20
window = "1s"
burst = 1
action = "delay"
max_delay = "20s"
max_waiting = 1000
)";

class FairWaiting : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::kRedis) redis_.emplace();
  }
  std::string Config(const std::string& rules) const {
    std::string text = BasicConfig(std::string(kIdentity) + rules);
    text.replace(text.find("threads = 1"), 11, "threads = 2");
    if (redis_) {
      text += RedisStoreSection("url = \"" + redis_->url() + "\"", "deny", "500ms", "");
    }
    return text;
  }
  std::optional<RedisServer> redis_;
};

// Thirty keep-alive clients of one user keep the rule saturated; a lone
// user's five requests still get a turn each after a few of theirs.
void CrowdAgainstALoneClient(std::uint16_t port, const std::string& target) {
  std::atomic<bool> stop{false};
  std::atomic<int> crowd_served{0};
  std::vector<std::thread> crowd;
  for (int c = 0; c < 30; ++c) {
    crowd.emplace_back([&] {
      Client client(port, 30'000, "127.0.0.2");
      while (!stop) {
        if (client.Get(target, "X-User-Id: crowd\r\n").result_int() == 200) ++crowd_served;
      }
    });
  }
  // The crowd is waiting once it has had a few served.
  while (crowd_served < 4) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  Client lone(port, 30'000, "127.0.0.3");
  const int before = crowd_served;
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(lone.Get(target, "X-User-Id: lone\r\n").result_int(), 200);
  }
  const int during = crowd_served - before;
  std::cout << "crowd requests served during the lone client's five: " << during << "\n";
  stop = true;
  for (auto& t : crowd) t.join();
  // Fair turns: a few crowd requests per lone one (first come, first
  // served would put each lone request behind the thirty).
  EXPECT_LE(during, 40);
}

TEST_P(FairWaiting, AMaxInflightCrowdDoesNotStarveALoneClient) {
  auto echo = StartEcho();
  TestGateway gateway(Config(Places(2, 1000)), echo->port(), TestClock::kSteady);
  CrowdAgainstALoneClient(gateway.port(), "/_test/sleep/50");
}

TEST_P(FairWaiting, ADelayCrowdDoesNotStarveALoneClient) {
  auto echo = StartEcho();
  TestGateway gateway(Config(kTwentyASecond), echo->port(), TestClock::kSteady);
  CrowdAgainstALoneClient(gateway.port(), "/");
}

INSTANTIATE_TEST_SUITE_P(Stores, FairWaiting, ::testing::Values(Backend::kLocal, Backend::kRedis),
                         BackendName);

// [limits] weight: two users keep four requests each waiting for a delay
// rule's turns; the premium one (weight 4) gets about four for each of
// the other's.
TEST(FairWaitingWeights, WeightsSetTheShares) {
  auto echo = StartEcho();
  std::string text = BasicConfig(std::string(kIdentity) + kTwentyASecond);
  text += "[limits]\nweight = { premium = 4 }\n";
  TestGateway gateway(text, echo->port(), TestClock::kSteady);
  std::atomic<bool> stop{false};
  std::atomic<int> served[2] = {0, 0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&, c] {
      const int premium = c % 2;
      Client client(gateway.port(), 30'000, "127.0.0.2");
      const std::string headers = premium ? "X-User-Id: p\r\nX-User-Role: premium\r\n"
                                          : "X-User-Id: b\r\nX-User-Role: basic\r\n";
      while (!stop) {
        if (client.Get("/", headers).result_int() == 200) ++served[premium];
      }
    });
  }
  // Until the shares are clear: 100 served after the first few.
  while (served[0] + served[1] < 10) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const int start[2] = {served[0], served[1]};
  while (served[0] + served[1] - start[0] - start[1] < 100) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double premium = served[1] - start[1];
  const double basic = served[0] - start[0];
  stop = true;
  for (auto& t : clients) t.join();
  EXPECT_GE(premium / std::max(1.0, basic), 2.5) << premium << " vs " << basic;
  EXPECT_LE(premium / std::max(1.0, basic), 6.5) << premium << " vs " << basic;
}

// priority: while low-priority requests wait for a place, a high one
// goes before them all; and when the line is full, a high newcomer pushes
// out a low waiter (429 too_many_inflight) instead of being refused.
TEST(FairWaitingPriority, HighGoesFirstAndPushesOutLow) {
  auto echo = StartEcho();
  const std::string rules = R"(
[[routes]]
path_prefix = "/_test/sleep/"
upstream = "api"
priority = "low"
)" + Places(1, 6) + R"(
[[rules]]
name = "urgent"
match = { header = { "X-Urgent" = "1" } }
key = "ip"
max_inflight = 1000
priority = "high"
)";
  // (The longest route prefix wins: the sleeping requests are "low".)
  TestGateway gateway(BasicConfig(std::string(kIdentity) + rules), echo->port(),
                      TestClock::kSteady);
  // One low request holds the place; six wait (a full line), the first of
  // them with the turn.
  std::vector<std::thread> lows;
  std::atomic<int> low_ok{0};
  std::atomic<int> low_shed{0};
  for (int i = 0; i < 7; ++i) {
    lows.emplace_back([&, i] {
      Client client(gateway.port(), 30'000, "127.0.0.2");
      const Response r =
          client.Get("/_test/sleep/400", "X-User-Id: low" + std::to_string(i) + "\r\n");
      if (r.result_int() == 200) ++low_ok;
      if (r.result_int() == 429 && r.body().find("too_many_inflight") != std::string::npos) {
        ++low_shed;
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // The high one pushes a low one out and is next in line: it is served
  // after the holder and the low one whose turn it already was, not after
  // the six.
  Client high(gateway.port(), 30'000, "127.0.0.3");
  const auto asked = std::chrono::steady_clock::now();
  EXPECT_EQ(high.Get("/_test/sleep/400", "X-Urgent: 1\r\n").result_int(), 200);
  const auto waited = std::chrono::steady_clock::now() - asked;
  const int low_done_by_then = low_ok;
  for (auto& t : lows) t.join();
  EXPECT_EQ(low_shed, 1);
  EXPECT_EQ(low_ok, 6);
  EXPECT_LE(low_done_by_then, 2) << std::chrono::duration<double>(waited).count() << " s";
}

// A client that leaves while it waits for a place gives its place in line
// back at once: with a line of one, the next request may wait again.
TEST(FairWaitingLeave, AClientThatLeavesFreesItsPlaceInLine) {
  auto echo = StartEcho();
  TestGateway gateway(BasicConfig(Places(1, 1)), echo->port(), TestClock::kSteady);
  std::thread holder([&] {
    Client client(gateway.port(), 30'000);
    EXPECT_EQ(client.Get("/_test/sleep/1500").result_int(), 200);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  {
    // Waits (the line's one place), then leaves.
    Client leaver(gateway.port(), 30'000);
    leaver.Send("GET /_test/sleep/10 HTTP/1.1\r\nHost: x\r\n\r\n");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    // Meanwhile the line is full: another is refused at once.
    Client third(gateway.port(), 30'000);
    EXPECT_EQ(third.Get("/_test/sleep/10").result_int(), 429);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // The leaver's place is free: this one waits and is served.
  Client next(gateway.port(), 30'000);
  EXPECT_EQ(next.Get("/_test/sleep/10").result_int(), 200);
  holder.join();
}

}  // namespace
}  // namespace tollgate::testing
