// Protecting upstreams (issue 7) through a real gateway in front of the echo
// upstream's partner API (/_test/limited/..., its own fixed-window limit and
// X-RateLimit-* headers): limits learned from the upstream, concurrency
// limits per rule key and per upstream with clients aborting at random.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <random>
#include <thread>

#include "test_support.h"

namespace tollgate::testing {
namespace {

namespace json = boost::json;

// BasicConfig on two threads, with `upstream_options` added to its upstream.
std::string Config(const std::string& upstream_options, const std::string& rules = "") {
  std::string text = BasicConfig(rules);
  text.replace(text.find("threads = 1"), 11, "threads = 2");
  const std::string servers = "servers = [\"127.0.0.1:{ECHO}\"]\n";
  text.insert(text.find(servers) + servers.size(), upstream_options);
  return text;
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

TEST(LearnedLimits, ABurstNeverMeetsTheUpstreamsRefusal) {
  auto echo = StartEcho();
  TestGateway gateway(Config(kLearnByPath), echo->port(), TestClock::kSteady);
  // The partner allows 8 requests per 400 ms per bucket; 40 arrive at once.
  const std::string target = "/_test/limited/a?limit=8&window=400";
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

TEST(LearnedLimits, AGlobalRefusalHoldsTheWholeUpstream) {
  auto echo = StartEcho();
  TestGateway gateway(Config(kLearnByPath), echo->port(), TestClock::kSteady);
  // Someone else exhausts the partner, which then refuses everything
  // (globally) until its window ends.
  Client direct(echo->port());
  const std::string other = "/_test/limited/x?limit=1&window=1500&global=1";
  EXPECT_EQ(direct.Get(other).result_int(), 200);
  EXPECT_EQ(direct.Get(other).result_int(), 429);
  Client client(gateway.port(), 20'000);
  // The learning answer: the upstream's own global 429 passes through ...
  const Response first = client.Get("/_test/limited/y?limit=5&window=1500");
  EXPECT_EQ(first.result_int(), 429);
  EXPECT_EQ(first["X-RateLimit-Global"], "true");
  // ... after which no bucket is tried before the block ends.
  const Response second = client.Get("/_test/limited/z?limit=5&window=1500");
  EXPECT_EQ(second.result_int(), 200) << second;
  const json::object stats = PartnerStats(echo->port());
  EXPECT_EQ(stats.at("z").at("refused").as_int64(), 0);
  EXPECT_EQ(stats.at("y").at("refused").as_int64(), 1);
}

TEST(LearnedLimits, ABucketWithoutResetTimeWaitsTheDefaultOrIsRefused) {
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

TEST(Concurrency, PerKeyPlacesComeBackWhateverClientsDo) {
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

TEST(Concurrency, UpstreamCapAnswers503Beyond) {
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

TEST(Concurrency, ConfigErrorsSayWhatIsWrong) {
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
