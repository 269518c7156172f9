// Leased quotas (sync = "lease", store/leasing_store.h) across a fleet:
// three real tollgate processes on one real redis-server, under concurrent
// load from several clients spread over them, never admit more than the
// algorithm allows (a fixed_window and a token_bucket on a `global` key),
// admit nearly all of it when the load is balanced, and call Redis far less
// often than once per request.
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
 protected:
  // Starts the fleet with `rules` (each with sync = "lease").
  void Start(const std::string& rules) {
    std::string config =
        BasicConfig(RedisStoreSection("url = \"" + redis_.url() + "\"", "deny", "2s") + rules);
    config.replace(config.find("threads = 1"), 11, "threads = 2");
    const std::string file = dir_.Write("tollgate.toml", WithEchoPort(config, echo_->port()));
    for (int g = 0; g < kGateways; ++g) {
      gateways_.push_back(
          std::make_unique<Process>(std::vector<std::string>{TOLLGATE_BINARY, "--config", file}));
      ports_.push_back(WaitForPort(*gateways_.back()));
    }
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
};

TEST_F(LeaseFleet, AFixedWindowIsNeverExceededAndNearlyAllOfItIsAdmitted) {
  Start(R"(
[[rules]]
name = "fixed"
key = "global"
algorithm = "fixed_window"
limit = 300
window = "1h"
sync = "lease"
)");
  const std::uint64_t calls_before = EvalshaCalls(redis_);
  const LoadResult r = Load("/fixed");
  const std::uint64_t calls = EvalshaCalls(redis_) - calls_before;
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

}  // namespace
}  // namespace tollgate::testing
