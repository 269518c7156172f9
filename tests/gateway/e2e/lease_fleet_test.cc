// Leased quotas (sync = "lease", store/leasing_store.h) across a fleet:
// three real tollgate processes on one real redis-server, under concurrent
// load from several clients spread over them, never admit more than the
// algorithm allows (a fixed_window and a token_bucket on a `global` key),
// admit nearly all of it when the load is balanced, and call Redis far less
// often than once per request; with on_error = "share", while Redis is down
// each gateway admits its share of the limit (the membership heartbeat
// counted the fleet), so the fleet stays within the limit plus the leases
// it held when Redis failed. A gateway killed with SIGKILL costs the fleet
// the units it held only until its lease ends; a reload that changes the
// limit leaves the old limit's leases unspent.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "redis_server.h"
#include "prometheus.h"
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
    const std::string file = Configure(rules, on_error, timeout);
    for (int g = 0; g < kGateways; ++g) {
      gateways_.push_back(
          std::make_unique<Process>(std::vector<std::string>{TOLLGATE_BINARY, "--config", file}));
      const auto [port, admin] = WaitForPorts(*gateways_.back());
      ports_.push_back(port);
      admin_ports_.push_back(admin);
    }
    // Until both worker threads of every gateway are connected to Redis: a
    // lease take sent before is refused at once, and the key's requests go
    // to on_error for the failed take's backoff (a loaded machine connects
    // late; the first requests of a test would then be refused).
    for (int g = 0; g < kGateways; ++g) {
      ASSERT_TRUE(ReadyzShows(g, "\"connections_up\":2")) << Admin(g, "/readyz");
    }
  }

  // Writes the fleet's configuration file with `rules` (again: a reload's
  // new text); its path.
  std::string Configure(const std::string& rules, const std::string& on_error = "deny",
                        const std::string& timeout = "2s") {
    std::string config =
        BasicConfig(RedisStoreSection("url = \"" + redis_.url() + "\"", on_error, timeout) + rules);
    config.replace(config.find("threads = 1"), 11, "threads = 2");
    return dir_.Write("tollgate.toml", WithEchoPort(config, echo_->port()));
  }

  // What gateway `g`'s admin listener answers to GET `target`.
  std::string Admin(int g, const std::string& target) {
    Client client(admin_ports_[g]);
    return client.Get(target).body();
  }

  // Whether gateway `g`'s /readyz shows `text` within 10 s (polled).
  bool ReadyzShows(int g, const std::string& text) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (Admin(g, "/readyz").find(text) == std::string::npos) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }

  // Sends `n` requests for `path` to gateway `g` one after the other; the
  // number allowed.
  int Send(int g, const std::string& path, int n) {
    Client client(ports_[g]);
    return Send(client, path, n);
  }
  // The same on `client`'s connection (one worker thread of its gateway,
  // the same one each time).
  static int Send(Client& client, const std::string& path, int n) {
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
    EXPECT_TRUE(ReadyzShows(g, "\"gateways\":3")) << Admin(g, "/readyz");
    EXPECT_EQ(IntSample(Admin(g, "/metrics"), "tollgate_cluster_gateways"), 3);
  }
  // Leases taken while Redis answers.
  for (int g = 0; g < kGateways; ++g) EXPECT_EQ(Send(g, "/leased", 10), 10);
  std::int64_t in_hand = 0;
  for (int g = 0; g < kGateways; ++g) {
    in_hand += IntSample(Admin(g, "/metrics"), "tollgate_lease_units_in_hand{rule=\"leased\"}");
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
    EXPECT_GT(IntSample(Admin(g, "/metrics"), "tollgate_store_fallback_total{policy=\"share\"}"), 0);
  }
}

// The units gateway `g` holds for `rule` (tollgate_lease_units_in_hand),
// once no take is on its way: the same count twice, 100 ms apart (a
// background renewal started by the last request lands within that).
std::int64_t SettledInHand(LeaseFleet& fleet, int g, const std::string& rule) {
  const std::string name = "tollgate_lease_units_in_hand{rule=\"" + rule + "\"}";
  std::int64_t last = IntSample(fleet.Admin(g, "/metrics"), name);
  for (int i = 0; i < 50; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::int64_t now = IntSample(fleet.Admin(g, "/metrics"), name);
    if (now == last) return now;
    last = now;
  }
  ADD_FAILURE() << "gateway " << g << "'s units in hand never settled";
  return last;
}

// A gateway killed with SIGKILL gives nothing back: the units it held stay
// withdrawn from the shared bucket until its lease's hold ends (lease_ttl +
// the Redis store's timeout), then count as spent at that moment, and the
// bucket refills from there (docs/leases.md, "What a gateway loses"). Right
// after the kill the other gateways admit at least the bucket less what the
// killed one used and held; once the hold has ended and the bucket has had
// the time to refill, the whole burst again, which they could not if the
// dead lease were still counted.
TEST_F(LeaseFleet, AKilledGatewaysUnitsAreLostOnlyUntilItsLeaseEnds) {
  // 20 tokens, 10 a second: a token every 100 ms, far slower than the
  // requests below come.
  Start(R"(
[[rules]]
name = "bucket"
key = "global"
algorithm = "token_bucket"
limit = 10
window = "1s"
burst = 20
sync = "lease"
lease_ttl = "1s"
lease_max = 10
)",
        "deny", "500ms");
  constexpr int kBurst = 20;
  constexpr auto kHold = std::chrono::milliseconds(1000 + 500);  // lease_ttl + timeout
  constexpr auto kRefill = std::chrono::milliseconds(2000);      // empty to full
  constexpr auto kMargin = std::chrono::milliseconds(500);
  // The victim's requests come fast enough for it to take leases of
  // several units ahead (its rate over lease_ttl).
  const std::int64_t start_ms = NowMs();
  const int used = Send(0, "/bucket", 6);
  const std::int64_t held = SettledInHand(*this, 0, "bucket");
  ASSERT_GT(used, 0);
  ASSERT_GT(held, 0) << "the victim holds nothing: the test would show nothing";
  gateways_[0]->Signal(SIGKILL);
  EXPECT_EQ(gateways_[0]->Wait(), 128 + SIGKILL);

  // Before the hold ends: everything but the dead lease (and what the
  // victim used), and never more than the bucket allows over the interval.
  int before = 0;
  for (int g = 1; g < kGateways; ++g) before += Send(g, "/bucket", 40);
  const std::int64_t elapsed_ms = NowMs() - start_ms + 1;
  EXPECT_GE(before, kBurst - used - held) << "used " << used << ", held " << held;
  EXPECT_LE(used + before, kBurst + (10 * elapsed_ms + 999) / 1000) << "elapsed " << elapsed_ms;

  // Every lease taken so far (the victim's included) has ended within
  // kHold, and an emptied bucket refills in kRefill: waiting for the real
  // lease_ttl, nothing else is timed.
  std::this_thread::sleep_for(kHold + kRefill + kMargin);
  const std::int64_t after_start_ms = NowMs();
  int after = 0;
  for (int g = 1; g < kGateways; ++g) after += Send(g, "/bucket", 40);
  const std::int64_t after_ms = NowMs() - after_start_ms + 1;
  EXPECT_GE(after, kBurst) << "held by the dead gateway: " << held;
  EXPECT_LE(after, kBurst + (10 * after_ms + 999) / 1000) << "elapsed " << after_ms;
}

// A reload that changes a rule's limit changes its fingerprint: the leases
// of the old limit, still valid (lease_ttl is an hour here, so that they
// would not lapse on their own during the test), are never spent again, and
// the fleet admits exactly the new limit, counted afresh.
TEST_F(LeaseFleet, AReloadThatChangesTheLimitDropsTheOldLimitsLeases) {
  const auto rule = [](int limit) {
    return "[[rules]]\nname = \"window\"\nkey = \"global\"\nalgorithm = \"fixed_window\"\n"
           "limit = " +
           std::to_string(limit) + "\nwindow = \"1d\"\nsync = \"lease\"\nlease_ttl = \"1h\"\n";
  };
  constexpr std::int64_t kDayMs = 86'400'000;
  Start(rule(300));
  const std::int64_t start_ms = NowMs();
  // One connection per gateway, kept: the same worker thread (and its
  // leases) before and after the reload.
  std::vector<std::unique_ptr<Client>> clients;
  std::int64_t held = 0;
  for (int g = 0; g < kGateways; ++g) {
    clients.push_back(std::make_unique<Client>(ports_[g]));
    EXPECT_EQ(Send(*clients.back(), "/window", 10), 10);
    held += SettledInHand(*this, g, "window");
  }
  ASSERT_GT(held, 0) << "no gateway holds units of the old limit: the test would show nothing";

  Configure(rule(30));
  for (int g = 0; g < kGateways; ++g) {
    gateways_[g]->Signal(SIGHUP);
    std::string line;
    for (int i = 0; i < 50 && line.find("is in force") == std::string::npos; ++i) {
      line = gateways_[g]->StderrLine();
      ASSERT_NE(line, "") << "gateway " << g << " ended before its reload";
    }
    ASSERT_NE(line.find("is in force"), std::string::npos) << line;
  }
  // One gateway after the other, each until it is limited: the first takes
  // the whole new budget, the others find it spent. Old units spent on top
  // would show as more than 30.
  int after = 0;
  for (int g = 0; g < kGateways; ++g) after += Send(*clients[g], "/window", 40);
  if (start_ms / kDayMs != NowMs() / kDayMs) {
    GTEST_SKIP() << "a day boundary passed during the test";
  }
  EXPECT_EQ(after, 30) << "the old limit's units in hand: " << held;
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
