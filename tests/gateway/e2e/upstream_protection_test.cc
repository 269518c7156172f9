// Protecting upstreams (docs/protecting-upstreams.md) through a real gateway in front of the echo
// upstream's partner API (/_test/limited/..., its own fixed-window limit and
// X-RateLimit-* headers): limits learned from the upstream, concurrency
// limits per rule key and per upstream with clients aborting at random,
// delayed requests spread over windows. Each runs on the local store and on
// a real redis-server (where two gateways also share what they know).
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <atomic>
#include <future>
#include <optional>
#include <random>
#include <thread>

#include "redis_server.h"
#include "test_support.h"

namespace tollgate::testing {
namespace {

namespace json = boost::json;

// BasicConfig on two threads, with `upstream_options` added to its upstream;
// on `redis` when given.
std::string Config(const std::string& upstream_options, const std::string& rules = "",
                   const RedisServer* redis = nullptr, const std::string& redis_options = "") {
  std::string text = BasicConfig(rules);
  text.replace(text.find("threads = 1"), 11, "threads = 2");
  const std::string servers = "servers = [\"127.0.0.1:{ECHO}\"]\n";
  text.insert(text.find(servers) + servers.size(), upstream_options);
  if (redis != nullptr) {
    text += RedisStoreSection("url = \"" + redis->url() + "\"", "deny", "500ms", redis_options);
  }
  return text;
}

enum class Backend { kLocal, kRedis };

// The same behaviour on either store.
class Protection : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::kRedis) redis_.emplace();
  }
  const RedisServer* redis() const { return redis_ ? &*redis_ : nullptr; }
  std::string Config(const std::string& upstream_options, const std::string& rules = "",
                     const std::string& redis_options = "") const {
    return testing::Config(upstream_options, rules, redis(), redis_options);
  }
  // The partner's windows follow the store's clock: steady locally, Unix
  // time (Redis TIME) on Redis.
  std::string Partner(const std::string& bucket, int limit, int window_ms) const {
    return "/_test/limited/" + bucket + "?limit=" + std::to_string(limit) +
           "&window=" + std::to_string(window_ms) + (redis_ ? "&unix=1" : "");
  }
  // Sleeps until just after a window of `window_ms` begins on that clock,
  // so that a burst and its answers stay inside one partner window.
  void AlignToWindow(std::int64_t window_ms) const {
    using namespace std::chrono;
    const auto now =
        redis_ ? system_clock::now().time_since_epoch() : steady_clock::now().time_since_epoch();
    const std::int64_t ms = duration_cast<milliseconds>(now).count();
    std::this_thread::sleep_for(milliseconds(window_ms - ms % window_ms + 5));
  }

  std::optional<RedisServer> redis_;
};

std::string BackendName(const ::testing::TestParamInfo<Backend>& info) {
  return info.param == Backend::kLocal ? "Local" : "Redis";
}

json::object PartnerStats(std::uint16_t echo_port) {
  Client direct(echo_port);
  return json::parse(direct.Get("/_test/partner-stats").body()).as_object();
}

bool FromUpstream(const Response& r) { return r.find("X-Upstream-Port") != r.end(); }

// `clients` threads each send `each` requests for `target`; the responses.
std::vector<Response> Burst(std::uint16_t port, int clients, int each, const std::string& target) {
  std::vector<Response> all(static_cast<std::size_t>(clients * each));
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      Client client(port, 20'000);
      for (int i = 0; i < each; ++i)
        all[static_cast<std::size_t>(c * each + i)] = client.Get(target);
    });
  }
  for (auto& t : threads) t.join();
  return all;
}

// Buckets by partner path: /_test/limited/<name>.
constexpr const char* kLearnByPath = R"(
learn_limits = true
learn_bucket = "/_test/limited/{name}"
learn_max_delay = "10s"
)";

TEST_P(Protection, ABurstNeverMeetsTheUpstreamsRefusal) {
  auto echo = StartEcho();
  TestGateway gateway(Config(kLearnByPath), echo->port(), TestClock::kSteady);
  // The partner allows 8 requests per 400 ms per bucket; 40 arrive at once.
  const std::string target = Partner("a", 8, 400);
  const std::vector<Response> responses = Burst(gateway.port(), 10, 4, target);
  int ok = 0;
  for (const Response& r : responses) {
    EXPECT_TRUE(FromUpstream(r)) << r;
    EXPECT_EQ(r.result_int(), 200) << r;
    ok += r.result_int() == 200;
  }
  EXPECT_EQ(ok, 40);
  const json::object stats = PartnerStats(echo->port());
  const json::object& a = stats.at("a").as_object();
  EXPECT_EQ(a.at("served").as_int64(), 40);
  EXPECT_EQ(a.at("refused").as_int64(), 0);  // no request beyond the upstream's limit
  EXPECT_LE(a.at("max_in_window").as_int64(), 8);
}

TEST_P(Protection, AGlobalRefusalHoldsTheWholeUpstream) {
  auto echo = StartEcho();
  TestGateway gateway(Config(kLearnByPath), echo->port(), TestClock::kSteady);
  // Someone else exhausts the partner, which then refuses everything
  // (globally) until its window ends.
  AlignToWindow(1500);
  Client direct(echo->port());
  const std::string other = Partner("x", 1, 1500) + "&global=1";
  EXPECT_EQ(direct.Get(other).result_int(), 200);
  EXPECT_EQ(direct.Get(other).result_int(), 429);
  Client client(gateway.port(), 20'000);
  // The learning answer: the upstream's own global 429 passes through ...
  const Response first = client.Get(Partner("y", 5, 1500));
  EXPECT_EQ(first.result_int(), 429);
  EXPECT_EQ(first["X-RateLimit-Global"], "true");
  // ... after which no bucket is tried before the block ends.
  const Response second = client.Get(Partner("z", 5, 1500));
  EXPECT_EQ(second.result_int(), 200) << second;
  const json::object stats = PartnerStats(echo->port());
  EXPECT_EQ(stats.at("z").at("refused").as_int64(), 0);
  EXPECT_EQ(stats.at("y").at("refused").as_int64(), 1);
}

TEST_P(Protection, ABucketWithoutResetTimeWaitsTheDefaultOrIsRefused) {
  auto echo = StartEcho();
  // No rate-limit headers at all: the limit stays 1 and an empty bucket
  // waits 1 s, longer than learn_max_delay: tollgate answers 429 itself.
  TestGateway gateway(Config(R"(
learn_limits = true
learn_bucket = "upstream"
learn_max_delay = "200ms"
)"),
                      echo->port());
  Client client(gateway.port());
  EXPECT_EQ(client.Get("/plain").result_int(), 200);
  const Response held = client.Get("/plain");
  EXPECT_EQ(held.result_int(), 429);
  EXPECT_FALSE(FromUpstream(held));
  EXPECT_EQ(held["Retry-After"], "1");
  EXPECT_NE(held.body().find("upstream_rate_limited"), std::string::npos);
  // The empty bucket is forgotten after that 1 s: one more request goes.
  if (redis_) {
    const std::string key = redis_->Command({"KEYS", "*remaining"});
    const long ttl = std::stol(redis_->Command({"PTTL", key}));
    EXPECT_GT(ttl, 0);
    EXPECT_LE(ttl, 1000);
  } else {
    gateway.clock().Advance(1000);
    EXPECT_EQ(client.Get("/plain").result_int(), 200);
    EXPECT_EQ(client.Get("/plain").result_int(), 429);
  }
}

constexpr const char* kPerIp = R"(
[[rules]]
name = "two-at-once"
key = "ip"
max_inflight = 2
)";

// Clients that give up at random points: before sending, mid-request,
// while the upstream works, or after reading part of the answer.
void AbortAtRandom(std::uint16_t port, int requests, const std::string& target) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 random(static_cast<unsigned>(t));
      for (int i = 0; i < requests / 8; ++i) {
        Client client(port, 2000);
        const std::string request = "GET " + target + " HTTP/1.1\r\nHost: x\r\n\r\n";
        switch (random() % 4) {
          case 0:
            break;
          case 1:
            client.Send(request.substr(0, request.size() / 2));
            break;
          case 2:
            client.Send(request);
            std::this_thread::sleep_for(std::chrono::microseconds(random() % 3000));
            break;
          case 3:
            client.Send(request);
            client.Read();
            break;
        }
        boost::system::error_code ec;
        client.socket().set_option(boost::asio::socket_base::linger(true, 0), ec);
        client.socket().close(ec);
      }
    });
  }
  for (auto& t : threads) t.join();
}

// Waits until `n` concurrent requests for `target` are all admitted (the
// places of aborted requests are given back as the gateway notices them).
bool AllAdmitted(std::uint16_t port, int n, const std::string& target) {
  for (int attempt = 0; attempt < 50; ++attempt) {
    const std::vector<Response> rs = Burst(port, n, 1, target);
    if (std::all_of(rs.begin(), rs.end(),
                    [](const Response& r) { return r.result_int() == 200; })) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

TEST_P(Protection, PerKeyPlacesComeBackWhateverClientsDo) {
  auto echo = StartEcho();
  TestGateway gateway(Config("", kPerIp), echo->port(), TestClock::kSteady);
  // Six at once, each held 300 ms upstream: never more than two upstream.
  const std::vector<Response> rs = Burst(gateway.port(), 6, 1, "/_test/sleep/300");
  int ok = 0, refused = 0;
  for (const Response& r : rs) {
    ok += r.result_int() == 200;
    if (r.result_int() == 429) {
      ++refused;
      EXPECT_NE(r.body().find("too_many_inflight"), std::string::npos);
      EXPECT_EQ(r["Retry-After"], "1");
    }
  }
  EXPECT_EQ(ok + refused, 6);
  EXPECT_GE(ok, 2);
  EXPECT_LE(PartnerStats(echo->port()).at("_max_concurrent").as_int64(), 2);

  AbortAtRandom(gateway.port(), 2000, "/_test/sleep/2");
  // Every place came back: two at once are admitted again.
  EXPECT_TRUE(AllAdmitted(gateway.port(), 2, "/_test/sleep/200"));
  EXPECT_LE(PartnerStats(echo->port()).at("_max_concurrent").as_int64(), 2);
}

TEST_P(Protection, BeyondMaxInflightARequestWaitsForAPlace) {
  auto echo = StartEcho();
  TestGateway gateway(Config("", std::string(kPerIp) + "max_delay = \"5s\"\nmax_waiting = 4\n"),
                      echo->port(), TestClock::kSteady);
  // Six at once, 300 ms each, two places: all served, two by two.
  const std::vector<Response> rs = Burst(gateway.port(), 6, 1, "/_test/sleep/300");
  for (const Response& r : rs) EXPECT_EQ(r.result_int(), 200) << r;
  EXPECT_LE(PartnerStats(echo->port()).at("_max_concurrent").as_int64(), 2);
  // The line is bounded: with 2 in flight and 4 waiting, more are refused.
  const std::vector<Response> more = Burst(gateway.port(), 9, 1, "/_test/sleep/300");
  int refused = 0;
  for (const Response& r : more) refused += r.result_int() == 429;
  EXPECT_GE(refused, 3);
  EXPECT_LE(PartnerStats(echo->port()).at("_max_concurrent").as_int64(), 2);
}

// action = "delay" on a fixed window: 3x the limit in one burst. Every
// request is served within max_delay, spread over the following windows,
// and the partner (same window, same clock) never sees more than the limit.
TEST_P(Protection, DelayedRequestsSpreadOverWindows) {
  auto echo = StartEcho();
  TestGateway gateway(Config("", R"(
[[rules]]
name = "spread"
key = "global"
algorithm = "fixed_window"
limit = 4
window = "400ms"
action = "delay"
max_delay = "3s"
)"),
                      echo->port(), TestClock::kSteady);
  AlignToWindow(400);
  const std::vector<Response> rs = Burst(gateway.port(), 12, 1, Partner("spread", 4, 400));
  for (const Response& r : rs) EXPECT_EQ(r.result_int(), 200) << r;
  const json::object stats = PartnerStats(echo->port());
  EXPECT_EQ(stats.at("spread").at("served").as_int64(), 12);
  EXPECT_EQ(stats.at("spread").at("refused").as_int64(), 0);
  EXPECT_LE(stats.at("spread").at("max_in_window").as_int64(), 4);
  if (redis_) {
    // Every waiting request left the shared line.
    EXPECT_EQ(redis_->Command({"KEYS", "*enqueued"}), "tollgate:{spread:%2A}:enqueued");
    EXPECT_EQ(redis_->Command({"GET", "tollgate:{spread:%2A}:enqueued"}), "0");
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, Protection, ::testing::Values(Backend::kLocal, Backend::kRedis),
                         BackendName);

// Two gateways on one Redis learn together: the partner refuses nothing
// although both send it bursts.
TEST(SharedRedis, TwoGatewaysShareWhatTheyLearned) {
  RedisServer redis;
  auto echo = StartEcho();
  TestGateway a(Config(kLearnByPath, "", &redis), echo->port(), TestClock::kSteady);
  TestGateway b(Config(kLearnByPath, "", &redis), echo->port(), TestClock::kSteady);
  const std::string target = "/_test/limited/shared?limit=6&window=400&unix=1";
  auto from_b = std::async(std::launch::async, [&] { return Burst(b.port(), 5, 3, target); });
  const std::vector<Response> from_a = Burst(a.port(), 5, 3, target);
  int ok = 0;
  for (const Response& r : from_a) ok += r.result_int() == 200;
  for (const Response& r : from_b.get()) ok += r.result_int() == 200;
  EXPECT_EQ(ok, 30);
  const json::object stats = PartnerStats(echo->port());
  EXPECT_EQ(stats.at("shared").at("served").as_int64(), 30);
  EXPECT_EQ(stats.at("shared").at("refused").as_int64(), 0);
  EXPECT_LE(stats.at("shared").at("max_in_window").as_int64(), 6);
}

// max_inflight holds across gateways: leases in Redis.
TEST(SharedRedis, TwoGatewaysShareThePlaces) {
  RedisServer redis;
  auto echo = StartEcho();
  const std::string rules = std::string(kPerIp) + "max_delay = \"5s\"\n";
  TestGateway a(Config("", rules, &redis), echo->port(), TestClock::kSteady);
  TestGateway b(Config("", rules, &redis), echo->port(), TestClock::kSteady);
  auto from_b =
      std::async(std::launch::async, [&] { return Burst(b.port(), 4, 1, "/_test/sleep/250"); });
  const std::vector<Response> from_a = Burst(a.port(), 4, 1, "/_test/sleep/250");
  for (const Response& r : from_a) EXPECT_EQ(r.result_int(), 200) << r;
  for (const Response& r : from_b.get()) EXPECT_EQ(r.result_int(), 200) << r;
  EXPECT_LE(PartnerStats(echo->port()).at("_max_concurrent").as_int64(), 2);
  EXPECT_EQ(redis.Command({"KEYS", "*inflight*"}), "");  // every lease given back
}

// A lease outlives nothing: after inflight_ttl a place comes back even if
// its holder never gives it back (a crashed gateway).
TEST(SharedRedis, LeasesExpireAfterInflightTtl) {
  RedisServer redis;
  auto echo = StartEcho();
  TestGateway gateway(Config("", kPerIp, &redis, "inflight_ttl = \"300ms\"\n"), echo->port(),
                      TestClock::kSteady);
  auto held = std::async(std::launch::async,
                         [&] { return Burst(gateway.port(), 2, 1, "/_test/sleep/1500"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  Client client(gateway.port());
  EXPECT_EQ(client.Get("/").result_int(), 429);  // both places held
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(client.Get("/").result_int(), 200);  // their leases expired
  for (const Response& r : held.get()) EXPECT_EQ(r.result_int(), 200);
}

TEST(UpstreamCap, Answers503Beyond) {
  auto echo = StartEcho();
  TestGateway gateway(Config("max_connections = 3\n"), echo->port(), TestClock::kSteady);
  const std::vector<Response> rs = Burst(gateway.port(), 8, 1, "/_test/sleep/300");
  int ok = 0;
  for (const Response& r : rs) {
    ok += r.result_int() == 200;
    if (r.result_int() != 200) {
      EXPECT_EQ(r.result_int(), 503);
      EXPECT_NE(r.body().find("upstream_busy"), std::string::npos);
    }
  }
  EXPECT_GE(ok, 3);
  EXPECT_LE(PartnerStats(echo->port()).at("_max_concurrent").as_int64(), 3);
  AbortAtRandom(gateway.port(), 1000, "/_test/sleep/2");
  EXPECT_TRUE(AllAdmitted(gateway.port(), 3, "/_test/sleep/200"));
}

TEST(UpstreamCap, WaitsForAPlaceWithinMaxConnectionsDelay) {
  auto echo = StartEcho();
  TestGateway gateway(Config("max_connections = 2\nmax_connections_delay = \"5s\"\n"), echo->port(),
                      TestClock::kSteady);
  const std::vector<Response> rs = Burst(gateway.port(), 6, 1, "/_test/sleep/200");
  for (const Response& r : rs) EXPECT_EQ(r.result_int(), 200) << r;
  EXPECT_LE(PartnerStats(echo->port()).at("_max_concurrent").as_int64(), 2);
}

// Places go to waiting clients in turn, not to whoever polls at the right
// moment: thirty clients of one address keep an upstream of two places
// saturated, and a lone client of another address still gets every other
// place. (Before, it waited out most of its max_connections_delay per
// request while the crowd was served.) Counts, not times: how many
// requests the crowd had served while the lone client had its five.
TEST(UpstreamCap, ACrowdDoesNotStarveALoneClient) {
  auto echo = StartEcho();
  TestGateway gateway(Config("max_connections = 2\nmax_connections_delay = \"20s\"\n"),
                      echo->port(), TestClock::kSteady);
  std::atomic<bool> stop{false};
  std::atomic<int> crowd_served{0};
  std::vector<std::thread> crowd;
  for (int c = 0; c < 30; ++c) {
    crowd.emplace_back([&] {
      Client client(gateway.port(), 30'000, "127.0.0.2");
      while (!stop) {
        if (client.Get("/_test/sleep/50").result_int() == 200) ++crowd_served;
      }
    });
  }
  // The crowd is waiting once it has had a few served.
  while (crowd_served < 4) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  Client lone(gateway.port(), 30'000, "127.0.0.3");
  const int before = crowd_served;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(lone.Get("/_test/sleep/50").result_int(), 200);
  const int during = crowd_served - before;
  stop = true;
  for (auto& t : crowd) t.join();
  // Fair turns: a few crowd requests per lone one (the other place, and
  // those already holding one); polling let 66 to 760 through.
  EXPECT_LE(during, 25);
  EXPECT_LE(PartnerStats(echo->port()).at("_max_concurrent").as_int64(), 2);
}

TEST(UpstreamProtectionConfig, ErrorsSayWhatIsWrong) {
  std::string text = Config("learn_bucket = \"route\"\n", R"(
[[rules]]
name = "c"
key = "ip"
max_inflight = 2
algorithm = "fixed_window"
)");
  rules::LoadResult r = rules::LoadConfigText(WithEchoPort(text, 9), "t.toml");
  ASSERT_EQ(r.errors.size(), 2u);
  EXPECT_NE(r.errors[0].ToString().find("\"learn_bucket\" needs learn_limits = true"),
            std::string::npos);
  EXPECT_NE(r.errors[1].ToString().find("\"algorithm\" has no meaning with max_inflight"),
            std::string::npos);
}

}  // namespace
}  // namespace tollgate::testing
