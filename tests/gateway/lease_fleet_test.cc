// Leased quotas (sync = "lease", store/leasing_store.h) across a fleet:
// three real tollgate processes on one real redis-server, under concurrent
// load from several clients spread over them, never admit more than the
// algorithm allows (a fixed_window and a token_bucket on a `global` key),
// admit nearly all of it when the load is balanced, and call Redis far less
// often than once per request; with on_error = "share", while Redis is down
// each gateway admits its share of the limit (the membership heartbeat
// counted the fleet), so the fleet stays within the limit plus the leases
// it held when Redis failed.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "redis_server.h"
#include "test_support.h"

namespace tollgate::testing {
namespace {

constexpr int kGateways = 3;
constexpr int kClients = 9;
constexpr int kRequestsPerClient = 100;

std::uint64_t EvalshaCalls(RedisServer& redis) {
  const std::string stats = redis.Command({"INFO", "commandstats"});
  const std::size_t at = stats.find("cmdstat_evalsha:calls=");
  if (at == std::string::npos) return 0;
  return std::stoull(stats.substr(at + 22));
}

std::int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct LoadResult {
  int allowed = 0;  // 200s that the upstream answered
  int limited = 0;  // 429s
  std::int64_t start_ms = 0;
  std::int64_t end_ms = 0;
};

class LeaseFleet : public ::testing::Test {
 public:
  // Starts the fleet with `rules`; `timeout`: the Redis store's.
  void Start(const std::string& rules, const std::string& on_error = "deny",
             const std::string& timeout = "2s") {
    std::string config =
        BasicConfig(RedisStoreSection("url = \"" + redis_.url() + "\"", on_error, timeout) + rules);
    config.replace(config.find("threads = 1"), 11, "threads = 2");
    const std::string file = dir_.Write("tollgate.toml", WithEchoPort(config, echo_->port()));
    for (int g = 0; g < kGateways; ++g) {
      gateways_.push_back(
          std::make_unique<Process>(std::vector<std::string>{TOLLGATE_BINARY, "--config", file}));
      const auto [port, admin] = WaitForPorts(*gateways_.back());
      ports_.push_back(port);
      admin_ports_.push_back(admin);
    }
  }

  // What gateway `g`'s admin listener answers to GET `target`.
  std::string Admin(int g, const std::string& target) {
    Client client(admin_ports_[g]);
    return client.Get(target).body();
  }

  // Sends `n` requests for `path` to gateway `g` one after the other; the
  // number allowed.
  int Send(int g, const std::string& path, int n) {
    Client client(ports_[g]);
    int allowed = 0;
    for (int i = 0; i < n; ++i) {
      const Response r = client.Get(path);
      if (r.result_int() == 200) {
        ++allowed;
      } else if (r.result_int() != 429) {
        ADD_FAILURE() << r.result_int();
      }
    }
    return allowed;
  }

  // Every client sends its requests for `path` as fast as it can to one
  // gateway, the clients spread evenly over the fleet.
  LoadResult Load(const std::string& path) {
    std::atomic<int> allowed{0};
    std::atomic<int> limited{0};
    LoadResult result;
    result.start_ms = NowMs();
    std::vector<std::thread> clients;
    for (int c = 0; c < kClients; ++c) {
      clients.emplace_back([&, c] {
        Client client(ports_[c % kGateways]);
        for (int i = 0; i < kRequestsPerClient; ++i) {
          const Response r = client.Get(path);
          if (r.result_int() == 200 && r.count("X-Upstream-Port") == 1) {
            ++allowed;
          } else if (r.result_int() == 429) {
            ++limited;
          } else {
            ADD_FAILURE() << r.result_int();
          }
        }
      });
    }
    for (auto& t : clients) t.join();
    result.end_ms = NowMs();
    result.allowed = allowed;
    result.limited = limited;
    return result;
  }

  RedisServer redis_;
  std::unique_ptr<gateway::EchoUpstream> echo_ = StartEcho();
  TempDir dir_;
  std::vector<std::unique_ptr<Process>> gateways_;
  std::vector<std::uint16_t> ports_;
  std::vector<std::uint16_t> admin_ports_;
};

// The value of the first sample in a Prometheus text whose name and labels
// begin with `name`; -1 when there is none.
std::int64_t Sample(const std::string& metrics, const std::string& name) {
  const std::size_t at = metrics.find("\n" + name);
  if (at == std::string::npos) return -1;
  const std::size_t end = metrics.find('\n', at + 1);
  const std::size_t space = metrics.rfind(' ', end);
  return std::stoll(metrics.substr(space + 1, end - space - 1));
}

// A window rule of 300 an hour on a global key, leased by the fleet: at most
// 300 admitted, at least 90% of it, far fewer script calls than requests.
void ExpectAnHourOf300(LeaseFleet& fleet, RedisServer& redis, const std::string& algorithm);

TEST_F(LeaseFleet, AFixedWindowIsNeverExceededAndNearlyAllOfItIsAdmitted) {
  ExpectAnHourOf300(*this, redis_, "fixed_window");
}

TEST_F(LeaseFleet, ASlidingLogIsNeverExceededAndNearlyAllOfItIsAdmitted) {
  ExpectAnHourOf300(*this, redis_, "sliding_log");
}

TEST_F(LeaseFleet, ATokenBucketNeverAdmitsMoreThanBurstPlusRateTimesTheInterval) {
  Start(R"(
[[rules]]
name = "bucket"
key = "global"
algorithm = "token_bucket"
limit = 100
window = "1s"
burst = 100
sync = "lease"
lease_max = 20
)");
  const LoadResult r = Load("/bucket");
  EXPECT_EQ(r.allowed + r.limited, kClients * kRequestsPerClient);
  // Over [start, end] the fleet admits at most burst + rate × length: the
  // bucket starts full (a new key) and refills 100 a second.
  const std::int64_t elapsed_ms = r.end_ms - r.start_ms + 1;
  EXPECT_LE(r.allowed, 100 + (100 * elapsed_ms + 999) / 1000) << "elapsed " << elapsed_ms << " ms";
  EXPECT_GT(r.allowed, 0);
}

TEST_F(LeaseFleet, WithRedisDownEachGatewayAdmitsItsShare) {
  Start(R"(
[[rules]]
name = "exact"
match = { path_prefix = "/exact" }
key = "global"
algorithm = "fixed_window"
limit = 60
window = "1h"
[[rules]]
name = "leased"
match = { path_prefix = "/leased" }
key = "global"
algorithm = "fixed_window"
limit = 300
window = "1h"
sync = "lease"
)",
        "share", "200ms");
  // Every gateway counts the fleet (a heartbeat a second).
  for (int g = 0; g < kGateways; ++g) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (Admin(g, "/readyz").find("\"gateways\":3") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_NE(Admin(g, "/readyz").find("\"gateways\":3"), std::string::npos) << Admin(g, "/readyz");
    EXPECT_EQ(Sample(Admin(g, "/metrics"), "tollgate_cluster_gateways"), 3);
  }
  // Leases taken while Redis answers.
  for (int g = 0; g < kGateways; ++g) EXPECT_EQ(Send(g, "/leased", 10), 10);
  std::int64_t in_hand = 0;
  for (int g = 0; g < kGateways; ++g) {
    in_hand += Sample(Admin(g, "/metrics"), "tollgate_lease_units_in_hand{rule=\"leased\"}");
  }
  redis_.Kill();
  // The shares are decided on each gateway's steady clock, in its hours.
  const auto steady_hour = [] {
    return std::chrono::duration_cast<std::chrono::hours>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  const auto hour_before = steady_hour();
  int exact = 0;
  int leased = 0;
  for (int g = 0; g < kGateways; ++g) {
    exact += Send(g, "/exact", 40);
    leased += Send(g, "/leased", 150);
  }
  if (steady_hour() != hour_before) GTEST_SKIP() << "an hour boundary passed during the test";
  // Each gateway decides a third of each limit on its own: 20 and 100.
  EXPECT_EQ(exact, 60);
  EXPECT_GE(leased, 300);
  EXPECT_LE(leased, 300 + in_hand) << "in hand when Redis failed: " << in_hand;
  for (int g = 0; g < kGateways; ++g) {
    EXPECT_GT(Sample(Admin(g, "/metrics"), "tollgate_store_fallback_total{policy=\"share\"}"), 0);
  }
}

void ExpectAnHourOf300(LeaseFleet& fleet, RedisServer& redis, const std::string& algorithm) {
  fleet.Start("[[rules]]\nname = \"window\"\nkey = \"global\"\nalgorithm = \"" + algorithm +
              "\"\nlimit = 300\nwindow = \"1h\"\nsync = \"lease\"\n");
  const std::uint64_t calls_before = EvalshaCalls(redis);
  const LoadResult r = fleet.Load("/window");
  const std::uint64_t calls = EvalshaCalls(redis) - calls_before;
  constexpr std::int64_t kHourMs = 3'600'000;
  if (r.start_ms / kHourMs != r.end_ms / kHourMs) {
    GTEST_SKIP() << "an hour boundary passed during the test";
  }
  EXPECT_EQ(r.allowed + r.limited, kClients * kRequestsPerClient);
  EXPECT_LE(r.allowed, 300);
  // Balanced load keeps spending every gateway's units in hand: at least
  // 90% of the limit (the issue's floor).
  EXPECT_GE(r.allowed, 270);
  // An exact rule makes one script call per request (900); leases of up to
  // lease_max = 30 units, and no asking while the hour's budget is spent,
  // make a small fraction of that.
  EXPECT_LT(calls, static_cast<std::uint64_t>(kClients * kRequestsPerClient / 4)) << calls;
}

}  // namespace
}  // namespace tollgate::testing
