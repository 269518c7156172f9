// The gateway on the Redis store: limits shared through Redis, the on_error
// policies while Redis is down, /readyz, a wrong password at startup, and two
// tollgate processes sharing one limit exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <sstream>
#include <thread>
#include <vector>

#include "redis_server.h"
#include "rules/config.h"
#include "test_support.h"

namespace tollgate::testing {
namespace {

std::string RedisConfig(const RedisServer& redis, const std::string& on_error,
                        const std::string& rules) {
  return BasicConfig(RedisStoreSection("url = \"" + redis.url() + "\"", on_error, "50ms") + rules);
}

constexpr const char* kThreePerHour = R"(
[[rules]]
name = "three"
key = "ip"
algorithm = "fixed_window"
limit = 3
window = "1h"
)";

TEST(RedisGateway, LimitsThroughARedisCluster) {
  RedisCluster cluster;
  auto echo = StartEcho();
  // Many clients (X-Forwarded-For from a trusted proxy): their keys land on
  // every master; each gets exactly its three.
  TestGateway gateway(
      BasicConfig("[identity]\ntrusted_proxies = [\"127.0.0.1/32\"]\n" +
                  RedisStoreSection("nodes = [\"" + cluster.seed() + "\"]", "deny", "500ms") +
                  kThreePerHour),
      echo->port());
  Client client(gateway.port());
  for (int c = 0; c < 12; ++c) {
    const std::string from = "X-Forwarded-For: 198.51.100." + std::to_string(c) + "\r\n";
    for (int i = 0; i < 3; ++i) EXPECT_EQ(client.Get("/", from).result_int(), 200) << c;
    EXPECT_EQ(client.Get("/", from).result_int(), 429) << c;
  }
  std::size_t masters_with_keys = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    masters_with_keys += cluster.node(i).Command({"DBSIZE"}) != "0";
  }
  EXPECT_EQ(masters_with_keys, 3u);
}

TEST(RedisGateway, LimitsThroughRedis) {
  RedisServer redis;
  auto echo = StartEcho();
  TestGateway gateway(RedisConfig(redis, "deny", kThreePerHour), echo->port());
  Client client(gateway.port());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(client.Get("/").result_int(), 200) << i;
  const Response limited = client.Get("/");
  EXPECT_EQ(limited.result_int(), 429);
  EXPECT_NE(limited["RateLimit"].find("r=0"), std::string::npos);
  EXPECT_NE(redis.Command({"KEYS", "tollgate:{three:*"}), "");
  Client admin(gateway.admin_port());
  const Response ready = admin.Get("/readyz");
  EXPECT_EQ(ready.result_int(), 200);
  EXPECT_NE(ready.body().find("\"kind\":\"redis\",\"available\":true"), std::string::npos)
      << ready.body();
  // One request at a time: no decision shared a call.
  const std::string metrics = admin.Get("/metrics").body();
  EXPECT_NE(metrics.find("\ntollgate_store_batched_decisions_total 0\n"), std::string::npos);
}

TEST(RedisGateway, OnErrorDenyAnswers503WithRetryAfterAndIsNotReady) {
  RedisServer redis;
  auto echo = StartEcho();
  TestGateway gateway(RedisConfig(redis, "deny", kThreePerHour), echo->port());
  Client client(gateway.port());
  EXPECT_EQ(client.Get("/").result_int(), 200);
  redis.Kill();
  const Response denied = client.Get("/");
  EXPECT_EQ(denied.result_int(), 503);
  EXPECT_EQ(denied["Retry-After"], "1");
  EXPECT_NE(denied.body().find("store_unavailable"), std::string::npos);
  Client admin(gateway.admin_port());
  EXPECT_EQ(admin.Get("/readyz").result_int(), 503);
  redis.Start();
  // Service resumes once Redis is back. How soon (the reconnect backoff's
  // cap) is not timed here: the 30 s only ends a test that would hang.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int status = 0;
  while (std::chrono::steady_clock::now() < give_up) {
    status = client.Get("/").result_int();
    if (status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(status, 200);
}

TEST(RedisGateway, OnErrorAllowLetsRequestsThrough) {
  RedisServer redis;
  auto echo = StartEcho();
  TestGateway gateway(RedisConfig(redis, "allow", kThreePerHour), echo->port());
  Client client(gateway.port());
  redis.Kill();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(client.Get("/").result_int(), 200) << i;
  Client admin(gateway.admin_port());
  const Response ready = admin.Get("/readyz");
  EXPECT_EQ(ready.result_int(), 200);  // still serving: fail open
  EXPECT_NE(ready.body().find("\"available\":false"), std::string::npos) << ready.body();
}

TEST(RedisGateway, OnErrorLocalKeepsLimitingPerGateway) {
  RedisServer redis;
  auto echo = StartEcho();
  TestGateway gateway(RedisConfig(redis, "local", kThreePerHour), echo->port());
  Client client(gateway.port());
  redis.Kill();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(client.Get("/").result_int(), 200) << i;
  EXPECT_EQ(client.Get("/").result_int(), 429);
}

constexpr const char* kThreePerMinute = R"(
[[rules]]
name = "three"
key = "ip"
algorithm = "fixed_window"
limit = 3
window = "1m"
)";

// Redis's TIME in ms.
std::int64_t RedisNowMs(RedisServer& redis) {
  const std::string time = redis.Command({"TIME"});
  const std::size_t newline = time.find('\n');
  return std::stoll(time.substr(0, newline)) * 1000 + std::stoll(time.substr(newline + 1)) / 1000;
}

// With time = "server" Redis's windows are on Redis's clock; a gateway's
// on_error = "local" fallback keeps them there (its own clock plus the
// offset the heartbeat measured), so that two gateways whose clocks
// disagree cross no window edge of their own while Redis is paused: each
// admits the limit once in Redis's window, not again at its own edge, and
// admits again only once Redis's window is over.
TEST(RedisGateway, OnErrorLocalKeepsRedissWindowsAcrossAPause) {
  RedisServer redis;
  auto echo = StartEcho();
  std::vector<std::unique_ptr<TestGateway>> gateways;
  for (int i = 0; i < 2; ++i) {
    gateways.push_back(
        std::make_unique<TestGateway>(RedisConfig(redis, "local", kThreePerMinute), echo->port()));
    // Each gateway's own minute ends 2 s (3 s) from now on its clock.
    gateways.back()->clock().Set(1000 * 60'000 - 2000 - 1000 * i);
  }
  // Away from Redis's own window edge: at least 3 s past one (the last
  // heartbeat may be a second old) and 10 s before the next.
  while (RedisNowMs(redis) % 60'000 < 3000 || RedisNowMs(redis) % 60'000 > 50'000) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  // A heartbeat of each gateway has landed since its clock was set (its
  // membership then ends 3 s after now): each knows Redis's clock.
  const std::int64_t set_at = RedisNowMs(redis);
  const auto beaten = [&] {
    const std::string scores =
        redis.Command({"ZRANGE", "tollgate:{admin}:members", "0", "-1", "WITHSCORES"});
    std::vector<std::int64_t> ends;
    std::istringstream lines(scores);
    for (std::string member, score; std::getline(lines, member) && std::getline(lines, score);) {
      ends.push_back(std::stoll(score));
    }
    return ends.size() == 2 &&
           std::all_of(ends.begin(), ends.end(), [&](std::int64_t e) { return e > set_at + 3000; });
  };
  while (!beaten()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const std::int64_t to_redis_edge = 60'000 - RedisNowMs(redis) % 60'000;
  redis.Pause();
  for (auto& g : gateways) {
    Client client(g->port());
    for (int i = 0; i < 3; ++i) EXPECT_EQ(client.Get("/").result_int(), 200) << i;
    EXPECT_EQ(client.Get("/").result_int(), 429);
    // Past the gateway's own minute, within Redis's.
    g->clock().Advance(4000);
    EXPECT_EQ(client.Get("/").result_int(), 429);
    // Past Redis's minute.
    g->clock().Advance(to_redis_edge);
    EXPECT_EQ(client.Get("/").result_int(), 200);
  }
  redis.Resume();
}

TEST(RedisGateway, WrongPasswordIsAClearStartupError) {
  RedisServer redis("s3cret");
  std::string toml = RedisConfig(redis, "deny", kThreePerHour);
  toml.replace(toml.find("s3cret"), 6, "wrong!");
  toml = WithEchoPort(toml, 1);
  rules::LoadResult loaded = rules::LoadConfigText(toml, "test.toml");
  ASSERT_TRUE(loaded.config);
  store::ManualClock clock;
  std::string error;
  auto server =
      gateway::Server::Create(std::make_shared<const rules::Config>(*loaded.config), clock, error);
  EXPECT_EQ(server, nullptr);
  EXPECT_NE(error.find("authentication failed"), std::string::npos) << error;
}

// Two tollgate processes, two threads each, share one Redis: a fixed window
// of 40 per hour admits exactly 40 in total, a sliding log of 25 exactly 25.
TEST(RedisGateway, TwoProcessesShareLimitsExactly) {
  RedisServer redis;
  auto echo = StartEcho();
  std::string config = RedisConfig(redis, "deny", R"(
[[rules]]
name = "fixed"
match = { path_prefix = "/fixed" }
key = "global"
algorithm = "fixed_window"
limit = 40
window = "1h"
[[rules]]
name = "log"
match = { path_prefix = "/log" }
key = "global"
algorithm = "sliding_log"
limit = 25
window = "1h"
)");
  config.replace(config.find("threads = 1"), 11, "threads = 2");
  config = WithEchoPort(config, echo->port());
  config.replace(config.find("timeout = \"50ms\""), 16, "timeout = \"2s\"");
  TempDir dir;
  const std::string file = dir.Write("tollgate.toml", config);
  Process a({TOLLGATE_BINARY, "--config", file});
  Process b({TOLLGATE_BINARY, "--config", file});
  const std::uint16_t ports[] = {WaitForPort(a), WaitForPort(b)};
  const auto hour = [] {
    return std::chrono::duration_cast<std::chrono::hours>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  for (const char* path : {"/fixed", "/log"}) {
    const auto hour_before = hour();
    std::atomic<int> allowed{0};
    std::atomic<int> limited{0};
    std::vector<std::thread> clients;
    for (int c = 0; c < 6; ++c) {
      clients.emplace_back([&, c] {
        Client client(ports[c % 2]);
        for (int i = 0; i < 30; ++i) {
          const int status = client.Get(path).result_int();
          (status == 200 ? allowed : limited) += 1;
          if (status != 200 && status != 429) ADD_FAILURE() << status;
        }
      });
    }
    for (auto& t : clients) t.join();
    if (hour() != hour_before) GTEST_SKIP() << "an hour boundary passed during the test";
    EXPECT_EQ(allowed.load(), std::string_view(path) == "/fixed" ? 40 : 25) << path;
    EXPECT_EQ(allowed + limited, 180);
  }
}

// The real binary, so that a SIGPIPE would end it as it ends a deployed
// gateway: hiredis writes with write(), and Redis closing connections under
// load made those writes raise SIGPIPE (exit status 141).
TEST(RedisGateway, SurvivesRedisDroppingConnectionsUnderLoad) {
  RedisServer redis;
  auto echo = StartEcho();
  std::string config = RedisConfig(redis, "allow", R"(
[[rules]]
name = "many"
key = "ip"
algorithm = "token_bucket"
limit = 1000000
window = "1s"
)");
  TempDir dir;
  const std::string file = dir.Write("tollgate.toml", WithEchoPort(config, echo->port()));
  Process gateway({TOLLGATE_BINARY, "--config", file});
  const std::uint16_t port = WaitForPort(gateway);
  std::atomic<bool> stop{false};
  std::atomic<int> answered{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&] {
      while (!stop) {
        try {
          Client client(port, 2000);
          for (int i = 0; i < 50 && !stop; ++i) {
            if (client.Get("/").result_int() == 200) ++answered;
          }
        } catch (const std::exception&) {
          return;  // the gateway is gone: Wait() below tells how it ended
        }
      }
    });
  }
  // Decisions are being written while Redis closes every connection.
  for (int round = 0; round < 60; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    redis.Command({"CLIENT", "KILL", "TYPE", "normal"});
  }
  redis.Kill();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  stop = true;
  for (auto& t : clients) t.join();
  EXPECT_GT(answered.load(), 0);
  Client after(port);
  EXPECT_EQ(after.Get("/").result_int(), 200);  // on_error = "allow" while Redis is down
  gateway.Signal(SIGTERM);
  EXPECT_EQ(gateway.Wait(), 0);
}

// An idle gateway on the Redis store stops at SIGTERM at once, not at
// drain_timeout: its Redis connections are no work to drain.
TEST(RedisGateway, SigtermWhenIdleDoesNotWaitForTheDrainTimeout) {
  RedisServer redis;
  auto echo = StartEcho();
  std::string config = RedisConfig(redis, "deny", kThreePerHour);
  config.replace(config.find("threads = 1"), 11, "threads = 1\ndrain_timeout = \"30s\"");
  TempDir dir;
  const std::string file = dir.Write("tollgate.toml", WithEchoPort(config, echo->port()));
  Process gateway({TOLLGATE_BINARY, "--config", file});
  const std::uint16_t port = WaitForPort(gateway);
  {
    Client client(port);
    EXPECT_EQ(client.Get("/").result_int(), 200);
  }
  const auto signalled = std::chrono::steady_clock::now();
  gateway.Signal(SIGTERM);
  EXPECT_EQ(gateway.Wait(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - signalled, std::chrono::seconds(10));
}

}  // namespace
}  // namespace tollgate::testing
