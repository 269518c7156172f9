// /metrics: values that match what clients saw, the text format validated by
// promtool, and a real Prometheus server scraping the gateway.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json/parse.hpp>
#include <chrono>
#include <cstdio>
#include <regex>
#include <thread>

#include "prometheus.h"
#include "prometheus_server.h"
#include "test_support.h"

namespace tollgate::testing {
namespace {

constexpr const char* kRules = R"(
[[routes]]
path_prefix = "/down"
upstream = "down"
[[upstreams]]
name = "down"
servers = ["127.0.0.1:1"]
[[rules]]
name = "vip"
match = { header = { "X-Vip" = "1" } }
exempt = true
[[rules]]
name = "two \"per\" minute"
key = "ip"
algorithm = "fixed_window"
limit = 2
window = "1m"
)";

TEST(Metrics, CountWhatClientsSawInTheExpositionFormat) {
  auto echo = StartEcho();
  std::string config = BasicConfig(kRules);
  // Routes are matched longest prefix first; "/down" goes to a dead upstream.
  TestGateway gateway(config, echo->port());
  Client client(gateway.port());
  int ok = 0, limited = 0;
  for (int i = 0; i < 5; ++i) {
    const int status = client.Get("/x").result_int();
    (status == 200 ? ok : limited) += 1;
  }
  EXPECT_EQ(client.Get("/x", "X-Vip: 1\r\n").result_int(), 200);
  Client other(gateway.port());
  EXPECT_EQ(other.Get("/down").result_int(), 429);  // the IP's 2 per minute are used up

  Client admin(gateway.admin_port());
  const Response res = admin.Get("/metrics");
  ASSERT_EQ(res.result_int(), 200);
  EXPECT_EQ(res["Content-Type"], "text/plain; version=0.0.4; charset=utf-8");
  const std::string& text = res.body();
  EXPECT_EQ(ok, 2);
  const std::string rule = R"(rule="two \"per\" minute")";
  EXPECT_EQ(Sample(text, "tollgate_ratelimit_decisions_total{" + rule + ",decision=\"allowed\"}"),
            2);
  EXPECT_EQ(Sample(text, "tollgate_ratelimit_decisions_total{" + rule + ",decision=\"limited\"}"),
            limited + 1);
  EXPECT_EQ(Sample(text, "tollgate_ratelimit_decisions_total{rule=\"vip\",decision=\"exempt\"}"),
            1);
  EXPECT_EQ(Sample(text, "tollgate_requests_total{route=\"/\",code=\"200\"}"), 3) << text;
  EXPECT_EQ(Sample(text, "tollgate_requests_total{route=\"/\",code=\"429\"}"), limited);
  EXPECT_EQ(Sample(text, "tollgate_request_duration_seconds_count{route=\"/\"}"), 3 + limited);
  EXPECT_EQ(Sample(text, "tollgate_request_duration_seconds_bucket{route=\"/\",le=\"+Inf\"}"),
            3 + limited);
  EXPECT_EQ(Sample(text, "tollgate_upstream_duration_seconds_count{upstream=\"api\"}"), 3);
  EXPECT_EQ(Sample(text, "tollgate_active_connections{listener=\"127.0.0.1:0\"}"), 2);
  EXPECT_EQ(Sample(text, "tollgate_build_info{version=\"" TOLLGATE_VERSION "\"}"), 1);
  EXPECT_EQ(Sample(text, "tollgate_local_store_keys"), 1);

  std::string promtool;
  EXPECT_EQ(RunCommand("promtool check metrics", text, promtool), 0) << promtool;
  EXPECT_EQ(promtool, "") << promtool;
}

// process_* as Prometheus client libraries export them, with plausible
// values for this process (the gateway runs in it); the local store's
// decisions take no time to observe, so no store_duration_seconds.
TEST(Metrics, ProcessFiguresAndNoLocalStoreDuration) {
  auto echo = StartEcho();
  TestGateway gateway(BasicConfig(), echo->port());
  Client client(gateway.port());
  EXPECT_EQ(client.Get("/").result_int(), 200);
  // The kernel counts CPU time in clock ticks (10 ms): a process this young
  // may have none yet. It spends a few before the scrape.
  for (rusage usage{}; getrusage(RUSAGE_SELF, &usage) == 0 &&
                       usage.ru_utime.tv_sec * 1'000'000 + usage.ru_utime.tv_usec < 30'000;) {
  }
  Client admin(gateway.admin_port());
  const std::string text = admin.Get("/metrics").body();
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_GT(Sample(text, "process_cpu_seconds_total"), 0) << text;
  EXPECT_GT(Sample(text, "process_resident_memory_bytes"), 1 << 20);
  EXPECT_GE(Sample(text, "process_virtual_memory_bytes"),
            Sample(text, "process_resident_memory_bytes"));
  EXPECT_GT(Sample(text, "process_open_fds"), 3);
  EXPECT_GE(Sample(text, "process_max_fds"), Sample(text, "process_open_fds"));
  const double start = Sample(text, "process_start_time_seconds");
  EXPECT_LE(start, now + 1);
  EXPECT_GT(start, now - 3600);
  EXPECT_NE(text.find("# TYPE process_cpu_seconds_total counter\n"), std::string::npos);
  EXPECT_EQ(text.find("store_duration_seconds"), std::string::npos);
}

TEST(Metrics, UpstreamErrorsByKind) {
  auto echo = StartEcho();
  TestGateway gateway(BasicConfig(R"(
[[routes]]
path_prefix = "/down"
upstream = "down"
[[upstreams]]
name = "down"
servers = ["127.0.0.1:1"]
)"),
                      echo->port());
  Client client(gateway.port());
  EXPECT_EQ(client.Get("/down").result_int(), 502);
  Client admin(gateway.admin_port());
  const std::string text = admin.Get("/metrics").body();
  EXPECT_EQ(Sample(text, "tollgate_upstream_errors_total{upstream=\"down\",kind=\"connect\"}"), 1)
      << text;
  EXPECT_EQ(Sample(text, "tollgate_requests_total{route=\"/down\",code=\"502\"}"), 1);
}

TEST(Metrics, CanBeSwitchedOff) {
  auto echo = StartEcho();
  std::string config = BasicConfig();
  config.replace(config.find("[admin]\n"), 8, "[admin]\nmetrics = false\n");
  TestGateway gateway(config, echo->port());
  Client admin(gateway.admin_port());
  EXPECT_EQ(admin.Get("/metrics").result_int(), 404);
  // The status page is drawn from the metrics: off with them.
  EXPECT_EQ(admin.Get("/").result_int(), 404);
  EXPECT_EQ(admin.Get("/status.json").result_int(), 404);
}

// A real Prometheus scrapes the gateway every second; the number of 429s it
// holds equals the number the client saw.
TEST(Metrics, ScrapedByARealPrometheus) {
  auto echo = StartEcho();
  TestGateway gateway(BasicConfig(R"(
[[rules]]
name = "per-ip"
key = "ip"
algorithm = "token_bucket"
limit = 5
window = "1h"
)"),
                      echo->port());
  int limited = 0;
  {
    Client client(gateway.port());
    for (int i = 0; i < 40; ++i) limited += client.Get("/").result_int() == 429 ? 1 : 0;
  }
  ASSERT_EQ(limited, 35);

  PrometheusServer prometheus(gateway.admin_port());
  double seen = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline && seen != limited) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    const boost::json::value result =
        prometheus.Query("tollgate_ratelimit_decisions_total{decision=\"limited\"}");
    if (!result.is_array() || result.as_array().empty()) continue;
    seen = std::stod(std::string(result.as_array()[0].at("value").as_array()[1].as_string()));
  }
  EXPECT_EQ(seen, limited);
}

}  // namespace
}  // namespace tollgate::testing
