// The observability kit in deploy/ against a real Prometheus: it loads
// deploy/prometheus/tollgate-alerts.yml and scrapes a tollgate gateway
// (TLS and plain listeners, the Redis store with a leased rule, a live and
// a dead upstream) after traffic that includes 429s, 502s, a TLS handshake
// and a failed one; then every query of deploy/grafana/tollgate-dashboard.json
// (Grafana's variables replaced by concrete values) returns at least one
// series, every template variable has values, and every alert rule has
// been evaluated without error.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <chrono>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "prometheus_server.h"
#include "redis_server.h"
#include "net.h"
#include "tests/gateway/test_support.h"

namespace tollgate::testing {
namespace {

std::string ReadSourceFile(const std::string& path) {
  std::ifstream in(std::string(TOLLGATE_SOURCE_DIR) + "/" + path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_TRUE(in.good() || in.eof()) << path;
  return text.str();
}

// Every panel target's `expr`, panels within rows included, by panel title.
void CollectQueries(const boost::json::value& node,
                    std::vector<std::pair<std::string, std::string>>& out) {
  if (node.is_array()) {
    for (const auto& v : node.as_array()) CollectQueries(v, out);
  } else if (node.is_object()) {
    const auto& object = node.as_object();
    if (const auto* targets = object.if_contains("targets")) {
      for (const auto& t : targets->as_array()) {
        out.emplace_back(std::string(object.at("title").as_string()),
                         std::string(t.at("expr").as_string()));
      }
    }
    if (const auto* panels = object.if_contains("panels")) CollectQueries(*panels, out);
  }
}

// Grafana's variables as a dashboard user with "All" selected has them:
// $__rate_interval a minute (sixty scrapes here), the others any value.
std::string Concrete(std::string expr) {
  expr = std::regex_replace(expr, std::regex(R"(\$__rate_interval)"), "1m");
  return std::regex_replace(expr, std::regex(R"(\$\{?[A-Za-z_][A-Za-z0-9_]*\}?)"), ".*");
}

TEST(Observability, EveryDashboardQueryAndAlertRuleWorksOnARealPrometheus) {
  const boost::json::value dashboard =
      boost::json::parse(ReadSourceFile("deploy/grafana/tollgate-dashboard.json"));
  std::vector<std::pair<std::string, std::string>> queries;
  CollectQueries(dashboard.at("panels"), queries);
  ASSERT_GE(queries.size(), 20u);

  RedisServer redis;
  auto echo = StartEcho();
  TempDir dir;
  const auto [cert, key] = MakeCertificate(dir, "gateway.test");
  TestGateway gateway(R"(
[server]
threads = 1
[[listeners]]
address = "127.0.0.1:0"
[[listeners]]
address = "127.0.0.1:0"
tls = { cert = ")" + cert +
                          R"(", key = ")" + key + R"(" }
[admin]
address = "127.0.0.1:0"
[log]
access = "off"
)" + RedisStoreSection("url = \"" + redis.url() + "\"", "allow", "500ms") +
                          R"(
[[upstreams]]
name = "api"
servers = ["127.0.0.1:{ECHO}"]
[[upstreams]]
name = "down"
servers = ["127.0.0.1:)" + std::to_string(UnusedPort()) +
                          R"("]
[[routes]]
path_prefix = "/down"
upstream = "down"
[[routes]]
path_prefix = "/"
upstream = "api"
[[rules]]
name = "per-ip"
match = { path_prefix = "/api" }
key = "ip"
algorithm = "fixed_window"
limit = 5
window = "1h"
[[rules]]
name = "leased"
match = { path_prefix = "/leased" }
key = "global"
algorithm = "fixed_window"
limit = 1000
window = "1h"
sync = "lease"
)",
                      echo->port(), TestClock::kSteady);

  std::map<int, int> statuses;
  {
    Client client(gateway.port());
    for (int i = 0; i < 15; ++i) ++statuses[client.Get("/api").result_int()];
    for (int i = 0; i < 10; ++i) ++statuses[client.Get("/leased").result_int()];
  }
  for (int i = 0; i < 3; ++i) ++statuses[Client(gateway.port()).Get("/down").result_int()];
  EXPECT_EQ(statuses[429], 10);
  EXPECT_EQ(statuses[200], 15);
  EXPECT_EQ(statuses[502], 3);
  // One handshake that works and one that fails (plain text to TLS).
  Shell("curl -sk -o /dev/null https://127.0.0.1:" + std::to_string(gateway.port(1)) + "/");
  {
    Client plain(gateway.port(1));
    plain.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    plain.ReadToClose();
  }

  PrometheusServer prometheus(gateway.admin_port(), {std::string(TOLLGATE_SOURCE_DIR) +
                                                     "/deploy/prometheus/tollgate-alerts.yml"});
  // Until every query has a series (the first two scrapes, a second
  // apart, give rate() its two samples), or the bound: then each query
  // still empty is reported.
  std::map<std::string, std::string> empty;  // expr -> panel title and error
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    empty.clear();
    for (const auto& [title, expr] : queries) {
      std::string error;
      const boost::json::value result = prometheus.Query(Concrete(expr), &error);
      if (!result.is_array() || result.as_array().empty())
        empty[Concrete(expr)] = title + " " + error;
    }
  } while (!empty.empty() && std::chrono::steady_clock::now() < deadline);
  for (const auto& [expr, why] : empty) ADD_FAILURE() << "no series: " << why << "\n" << expr;

  // The template variables: label_values(selector, label) has values.
  for (const auto& v : dashboard.at("templating").at("list").as_array()) {
    if (v.at("type") != "query") continue;
    const std::string definition(v.at("definition").as_string());
    std::smatch m;
    ASSERT_TRUE(std::regex_match(definition, m, std::regex(R"(label_values\((.*), *(\w+)\))")))
        << definition;
    const boost::json::value values = prometheus.Api(
        "/api/v1/label/" + m[2].str() + "/values?match%5B%5D=" + UrlEncode(Concrete(m[1].str())));
    EXPECT_TRUE(values.is_array() && !values.as_array().empty()) << definition;
  }

  // Every alert rule evaluated, none in error (a rule not yet evaluated
  // has health "unknown": waited for within the same bound).
  std::vector<std::string> not_ok;
  std::size_t rules = 0;
  do {
    not_ok.clear();
    rules = 0;
    const boost::json::value data = prometheus.Api("/api/v1/rules");
    if (data.is_null()) {
      not_ok.push_back("no answer from /api/v1/rules");
    } else {
      for (const auto& group : data.at("groups").as_array()) {
        for (const auto& rule : group.at("rules").as_array()) {
          ++rules;
          if (rule.at("health") != "ok") not_ok.push_back(boost::json::serialize(rule));
        }
      }
    }
    if (!not_ok.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  } while (!not_ok.empty() && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(rules, 7u);
  for (const std::string& rule : not_ok) ADD_FAILURE() << rule;
}

}  // namespace
}  // namespace tollgate::testing
