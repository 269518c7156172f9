// `concurrency = "adaptive"` through a real gateway in front of the echo
// upstream's /_test/knee (an upstream that slows as it fills: C workers,
// each request beyond them stretches every one's service time). The limit,
// read from tollgate_upstream_concurrency_limit, settles well below a
// too-high fixed limit (all the clients at once) and above its minimum,
// and rises when the upstream gets faster (more workers); requests beyond
// the limit wait (max_connections_delay), so none is refused, probes of
// the minimum latency included; likewise in front of an HTTP/2 upstream
// with the same model. Counts and gauges, not times.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/json/parse.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "prometheus.h"
#include "test_support.h"

namespace tollgate::testing {
namespace {

namespace json = boost::json;

constexpr int kClients = 40;  // a fixed limit this high lets them all in

std::int64_t Gauge(std::uint16_t admin_port, const std::string& family) {
  Client admin(admin_port);
  return IntSample(admin.Get("/metrics").body(), family + "{upstream=\"api\"}");
}

// The gauge once it reads `value`, or after a generous bound: a place
// goes back just after its response is written.
std::int64_t GaugeOnceAt(std::uint16_t admin_port, const std::string& family, std::int64_t value) {
  std::int64_t now = Gauge(admin_port, family);
  for (int i = 0; i < 500 && now != value; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    now = Gauge(admin_port, family);
  }
  return now;
}

// Waits (up to a generous bound, so that a slow machine only slows the
// test) until `served` has grown by `n`.
void WaitForServed(const std::atomic<int>& served, int n) {
  const int target = served + n;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (served < target && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// BasicConfig on two threads with an adaptive upstream (`protocol`:
// extra upstream keys) whose requests wait up to 60 s for a place.
std::string AdaptiveConfig(const std::string& protocol = "") {
  std::string config = BasicConfig();
  const std::string servers = "servers = [\"127.0.0.1:{ECHO}\"]\n";
  config.insert(config.find(servers) + servers.size(),
                protocol +
                    "concurrency = \"adaptive\"\nmax_connections_delay = \"60s\"\n"
                    "adaptive = { min = 2, max = 200, initial = 2, window = \"50ms\", "
                    "probe_interval = \"1s\" }\n");
  config.replace(config.find("threads = 1"), 11, "threads = 2");
  return config;
}

// kClients keep-alive clients asking for target() in a loop until Stop.
class Crowd {
 public:
  Crowd(std::uint16_t port, std::function<std::string()> target) {
    for (int c = 0; c < kClients; ++c) {
      clients_.emplace_back([this, port, target] {
        Client client(port, 90'000);
        while (!stop_) {
          if (client.Get(target()).result_int() == 200) {
            ++served;
          } else {
            ++refused;
          }
        }
      });
    }
  }
  ~Crowd() { Stop(); }
  void Stop() {
    stop_ = true;
    for (std::thread& t : clients_) {
      if (t.joinable()) t.join();
    }
  }
  std::atomic<int> served{0}, refused{0};

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> clients_;
};

TEST(AdaptiveConcurrency, SettlesNearTheKneeAndRisesWhenTheUpstreamGetsFaster) {
  auto echo = StartEcho();
  TestGateway gateway(AdaptiveConfig(), echo->port(), TestClock::kSteady);
  std::atomic<int> capacity{4};
  Crowd crowd(gateway.port(),
              [&] { return "/_test/knee/10?capacity=" + std::to_string(capacity.load()); });
  std::atomic<int>& served = crowd.served;
  // 4 workers of 10 ms: 400 requests a second at best.
  WaitForServed(served, 3000);
  const std::int64_t slow_limit =
      Gauge(gateway.admin_port(), "tollgate_upstream_concurrency_limit");
  EXPECT_GE(slow_limit, 2);
  EXPECT_LE(slow_limit, kClients / 2);

  // Eight times the workers: the limit goes up with them.
  capacity = 32;
  WaitForServed(served, 12000);
  const std::int64_t fast_limit =
      Gauge(gateway.admin_port(), "tollgate_upstream_concurrency_limit");
  EXPECT_GT(fast_limit, slow_limit);
  EXPECT_GE(fast_limit, 12);
  EXPECT_LE(Gauge(gateway.admin_port(), "tollgate_upstream_concurrency_inflight"), fast_limit);

  crowd.Stop();
  EXPECT_EQ(crowd.refused, 0);
  EXPECT_EQ(GaugeOnceAt(gateway.admin_port(), "tollgate_upstream_concurrency_inflight", 0), 0);
  // The status page shows it.
  Client admin(gateway.admin_port());
  const json::object status = json::parse(admin.Get("/status.json").body()).as_object();
  const json::object& api = status.at("upstreams").as_array().at(0).as_object();
  EXPECT_TRUE(api.at("concurrency").at("adaptive").as_bool());
  EXPECT_GE(api.at("concurrency").at("limit").as_int64(), 2);
}

// The same with an HTTP/2 upstream (upstream_peer.py's knee: the same
// model over h2c): its exchanges are samples too, the limit settles well
// below the clients, and nobody is refused.
TEST(AdaptiveConcurrency, SettlesNearTheKneeOfAnHttp2Upstream) {
  PortPeer peer({"/usr/bin/python3", std::string(TOLLGATE_HTTP2_SCRIPTS) + "/upstream_peer.py",
                 "knee", "{STATS}"});
  TestGateway gateway(AdaptiveConfig("protocol = \"h2c\"\n"), peer.port(), TestClock::kSteady);
  Crowd crowd(gateway.port(), [] { return std::string("/knee/10?capacity=4"); });
  // 4 workers of 10 ms: 400 requests a second at best.
  WaitForServed(crowd.served, 1500);
  const std::int64_t limit = Gauge(gateway.admin_port(), "tollgate_upstream_concurrency_limit");
  crowd.Stop();
  EXPECT_GE(limit, 2);
  EXPECT_LE(limit, kClients / 2);
  EXPECT_EQ(crowd.refused, 0);
  EXPECT_EQ(GaugeOnceAt(gateway.admin_port(), "tollgate_upstream_concurrency_inflight", 0), 0);
}

// A fixed concurrency is shown the same way: its limit and what is in
// flight.
TEST(AdaptiveConcurrency, AFixedLimitIsAGaugeToo) {
  auto echo = StartEcho();
  std::string config = BasicConfig();
  const std::string servers = "servers = [\"127.0.0.1:{ECHO}\"]\n";
  config.insert(config.find(servers) + servers.size(), "concurrency = 3\n");
  TestGateway gateway(config, echo->port(), TestClock::kSteady);
  Client client(gateway.port());
  EXPECT_EQ(client.Get("/").result_int(), 200);
  EXPECT_EQ(Gauge(gateway.admin_port(), "tollgate_upstream_concurrency_limit"), 3);
  EXPECT_EQ(GaugeOnceAt(gateway.admin_port(), "tollgate_upstream_concurrency_inflight", 0), 0);
}

}  // namespace
}  // namespace tollgate::testing
