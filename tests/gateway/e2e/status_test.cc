// The status page: StatusBoard's figures from samples taken by hand, the
// page and /status.json served by a gateway, and the page rendered by a real
// headless Chromium after traffic.
#include "gateway/admin/status.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <chrono>
#include <cstdio>
#include <functional>
#include <regex>
#include <set>
#include <thread>

#include "test_support.h"

namespace tollgate::testing {
namespace {

namespace json = boost::json;

rules::Config LoadConfig(const std::string& extra) {
  rules::LoadResult loaded =
      rules::LoadConfigText(WithEchoPort(BasicConfig(extra), 9), "status.toml");
  for (const auto& e : loaded.errors) ADD_FAILURE() << e.ToString();
  return std::move(*loaded.config);
}

constexpr const char* kRules = R"(
[[rules]]
name = "per-user"
key = "user"
algorithm = "fixed_window"
limit = 1
window = "1m"
[[rules]]
name = "per-ip"
key = "ip"
algorithm = "fixed_window"
limit = 2
window = "1m"
)";

json::object Render(const gateway::StatusBoard& board, const rules::Config& config) {
  gateway::StatusBoard::Context context;
  context.config = &config;
  context.generation = 3;
  context.version = "test";
  return json::parse(board.RenderJson(context)).as_object();
}

json::object RuleNamed(const json::object& doc, std::string_view name) {
  for (const json::value& r : doc.at("rules").as_array()) {
    if (r.at("name").as_string() == name) return r.as_object();
  }
  ADD_FAILURE() << "no rule " << name;
  return {};
}

TEST(StatusBoard, RatesPerSecondOverTheLastMinute) {
  const rules::Config config = LoadConfig(kRules);
  gateway::Metrics metrics(2, "test");
  const int per_user = metrics.RuleId("per-user");
  const int per_ip = metrics.RuleId("per-ip");
  gateway::StatusBoard board(metrics);
  board.Sample(0);
  // Second 1: both threads decide; second 2: nothing; second 3: limits.
  metrics.thread(0).RecordDecision(per_ip, gateway::DecisionKind::kAllowed);
  metrics.thread(1).RecordDecision(per_ip, gateway::DecisionKind::kAllowed);
  board.Sample(1000);
  board.Sample(2000);
  for (int i = 0; i < 3; ++i)
    metrics.thread(1).RecordDecision(per_ip, gateway::DecisionKind::kLimited);
  metrics.thread(0).RecordDecision(per_ip, gateway::DecisionKind::kDelayed);
  metrics.thread(0).RecordDecision(per_user, gateway::DecisionKind::kAllowed);
  board.Sample(3000);

  const json::object doc = Render(board, config);
  EXPECT_EQ(doc.at("samples").as_int64(), 3);
  EXPECT_EQ(doc.at("config").at("generation").as_int64(), 3);
  EXPECT_EQ(doc.at("config").at("digest").as_string().size(), 12u);
  const json::object ip = RuleNamed(doc, "per-ip");
  EXPECT_EQ(json::serialize(ip.at("allowed")), "[2,0,0]");
  EXPECT_EQ(json::serialize(ip.at("limited")), "[0,0,4]");  // limited and delayed
  EXPECT_EQ(ip.at("allowed_last_minute").as_int64(), 2);
  EXPECT_EQ(ip.at("limited_last_minute").as_int64(), 4);
  EXPECT_EQ(ip.at("key").as_string(), "ip");
  EXPECT_EQ(json::serialize(RuleNamed(doc, "per-user").at("allowed")), "[0,0,1]");

  // The history is bounded: one minute of per-second figures.
  for (int s = 4; s < 200; ++s) board.Sample(s * 1000);
  const json::object later = Render(board, config);
  EXPECT_EQ(later.at("samples").as_int64(), 60);
  EXPECT_EQ(RuleNamed(later, "per-ip").at("limited_last_minute").as_int64(), 0);
}

TEST(StatusBoard, LeasedRulesShowTheShareOfDecisionsMadeFromLeases) {
  const rules::Config config = LoadConfig(std::string(R"(
[store]
kind = "redis"
[store.redis]
url = "redis://127.0.0.1:1"
[[rules]]
name = "leased"
key = "global"
algorithm = "fixed_window"
limit = 100
window = "1m"
sync = "lease"
)") + kRules);
  gateway::Metrics metrics(1, "test");
  gateway::StatusBoard board(metrics);
  board.Sample(0);
  gateway::StatusBoard::Context context;
  context.config = &config;
  store::LeaseStats::Counts leased_counts;
  leased_counts.rule = "leased";
  leased_counts.decisions = 10;
  leased_counts.from_lease = 7;
  context.leases = {leased_counts};
  const json::object doc = json::parse(board.RenderJson(context)).as_object();
  const json::object leased = RuleNamed(doc, "leased");
  EXPECT_EQ(leased.at("lease").at("decisions").as_int64(), 10);
  EXPECT_EQ(leased.at("lease").at("from_lease").as_int64(), 7);
  EXPECT_FALSE(RuleNamed(doc, "per-ip").contains("lease"));
}

TEST(StatusBoard, TopLimitedKeysAreBoundedAndReadable) {
  const rules::Config config = LoadConfig(kRules);
  gateway::Metrics metrics(2, "test");
  gateway::StatusBoard board(metrics);
  board.Sample(0);
  const std::string user_key = "per-user\x1f";
  // alice is limited most, on both threads; then bob; then 20 others once.
  for (int i = 0; i < 7; ++i) metrics.thread(i % 2).RecordLimitedKey(user_key + "alice");
  for (int i = 0; i < 5; ++i) metrics.thread(0).RecordLimitedKey(user_key + "bob");
  for (int i = 0; i < 20; ++i)
    metrics.thread(1).RecordLimitedKey(user_key + "u" + std::to_string(i));
  // A thread tracks a bounded number of keys per interval; the rest is counted.
  for (std::size_t i = 0; i < gateway::ThreadMetrics::kMaxTrackedKeys + 5; ++i) {
    metrics.thread(0).RecordLimitedKey(user_key + "flood" + std::to_string(i));
  }
  board.Sample(1000);
  const json::object doc = Render(board, config);
  const json::array& top = doc.at("top_limited").as_array();
  ASSERT_EQ(top.size(), gateway::StatusBoard::kTopKeys);
  EXPECT_EQ(top[0].at("rule").as_string(), "per-user");
  EXPECT_EQ(top[0].at("key").as_string(), "user=alice");
  EXPECT_EQ(top[0].at("limited").as_int64(), 7);
  EXPECT_EQ(top[1].at("key").as_string(), "user=bob");
  EXPECT_EQ(top[1].at("limited").as_int64(), 5);
  // Thread 0 tracked alice, bob and 1022 flood keys (7 spilled); of the
  // 2 + 20 + 1022 keys merged, a sample keeps kKeysPerSecond (each once).
  EXPECT_EQ(doc.at("untracked_limited").as_int64(),
            7 + (2 + 20 + 1022 - static_cast<std::int64_t>(gateway::StatusBoard::kKeysPerSecond)));
  // Taken: the next interval starts empty.
  board.Sample(2000);
  EXPECT_EQ(Render(board, config).at("top_limited").as_array().size(),
            gateway::StatusBoard::kTopKeys);
  for (int s = 3; s < 70; ++s) board.Sample(s * 1000);
  EXPECT_TRUE(Render(board, config).at("top_limited").as_array().empty());
}

// A top-limited key carries the admin API query of its state, percent-
// encoded, unless what is shown of it does not name it (a header value,
// shown as a fingerprint).
TEST(StatusBoard, TopLimitedKeysNameTheirAdminQuery) {
  const rules::Config config = LoadConfig(std::string(kRules) + R"(
[[rules]]
name = "per-key"
key = "header:X-Api-Key"
algorithm = "fixed_window"
limit = 1
window = "1m"
)");
  gateway::Metrics metrics(1, "test");
  gateway::StatusBoard board(metrics);
  board.Sample(0);
  metrics.thread(0).RecordLimitedKey(
      "per-user\x1f"
      "a b&c");
  metrics.thread(0).RecordLimitedKey(
      "per-user\x1f"
      "a b&c");
  metrics.thread(0).RecordLimitedKey(
      "per-key\x1f"
      "secret");
  board.Sample(1000);
  const json::array top = Render(board, config).at("top_limited").as_array();
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].at("key"), "user=a b&c");
  EXPECT_EQ(top[0].at("query"), "rule=per-user&user=a%20b%26c");
  EXPECT_EQ(top[1].at("rule"), "per-key");
  EXPECT_FALSE(top[1].as_object().contains("query"));
}

TEST(StatusBoard, UpstreamHealthFromRecentResponsesAndFailures) {
  const rules::Config config = LoadConfig("");
  gateway::Metrics metrics(1, "test");
  const int api = metrics.UpstreamId("api");
  gateway::StatusBoard board(metrics);
  board.Sample(0);
  const auto state = [&] {
    return std::string(Render(board, config).at("upstreams").as_array()[0].at("state").as_string());
  };
  EXPECT_EQ(state(), "idle");
  metrics.thread(0).RecordUpstream(api, 0.001);
  board.Sample(1000);
  EXPECT_EQ(state(), "up");
  metrics.thread(0).RecordUpstreamFailure(api, gateway::UpstreamFailure::kConnect);
  for (int s = 2; s < 14; ++s) board.Sample(s * 1000);
  EXPECT_EQ(state(), "degraded");  // failed, but not in the last 10 s
  metrics.thread(0).RecordUpstreamFailure(api, gateway::UpstreamFailure::kTimeout);
  board.Sample(14'000);
  EXPECT_EQ(state(), "down");  // failures and no response in the last 10 s
}

// Polls /status.json until `done(doc)` or 10 s pass; the sampler runs once a
// second on the gateway's real clock.
json::object WaitForStatus(std::uint16_t admin_port,
                           const std::function<bool(const json::object&)>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  json::object doc;
  while (std::chrono::steady_clock::now() < deadline) {
    Client admin(admin_port);
    doc = json::parse(admin.Get("/status.json").body()).as_object();
    if (done(doc)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return doc;
}

// A day's window: the tests take seconds, and a window boundary within them
// would make a limited key fresh again.
constexpr const char* kLimitedRule = R"(
[[rules]]
name = "per-ip"
key = "ip"
algorithm = "fixed_window"
limit = 3
window = "1d"
)";

TEST(StatusPage, ServedWithItsJson) {
  auto echo = StartEcho();
  TestGateway gateway(BasicConfig(kLimitedRule), echo->port(), TestClock::kSteady);
  Client admin(gateway.admin_port());
  const Response page = admin.Get("/");
  ASSERT_EQ(page.result_int(), 200);
  EXPECT_EQ(page["Content-Type"], "text/html; charset=utf-8");
  EXPECT_NE(page["Content-Security-Policy"].find("default-src 'none'"), std::string::npos);
  EXPECT_NE(page.body().find("status.json"), std::string::npos);
  // Self-contained: nothing is loaded from elsewhere.
  for (const char* load : {" src=", "<link", "@import", "url(", "https://"}) {
    EXPECT_EQ(page.body().find(load), std::string::npos) << load;
  }

  Client client(gateway.port());
  for (int i = 0; i < 5; ++i) client.Get("/x");
  const json::object doc = WaitForStatus(gateway.admin_port(), [](const json::object& d) {
    return RuleNamed(d, "per-ip").at("limited_last_minute").as_int64() == 2;
  });
  EXPECT_EQ(RuleNamed(doc, "per-ip").at("allowed_last_minute").as_int64(), 3);
  EXPECT_EQ(RuleNamed(doc, "per-ip").at("limited_last_minute").as_int64(), 2);
  ASSERT_EQ(doc.at("top_limited").as_array().size(), 1u);
  EXPECT_EQ(doc.at("top_limited").as_array()[0].at("key").as_string(), "ip=127.0.0.1");
  // The page links the key to its state, which the admin API answers.
  const std::string query(doc.at("top_limited").as_array()[0].at("query").as_string());
  EXPECT_EQ(query, "rule=per-ip&ip=127.0.0.1");
  Client api(gateway.admin_port());
  const Response state = api.Get("/api/v1/keys?" + query);
  EXPECT_EQ(state.result_int(), 200) << state.body();
  EXPECT_EQ(json::parse(state.body()).at("limited"), true);
  EXPECT_EQ(doc.at("store").at("kind").as_string(), "local");
  EXPECT_EQ(doc.at("upstreams").as_array()[0].at("state").as_string(), "up");
  EXPECT_EQ(doc.at("config").at("last_reload").at("result").as_string(), "none");

  // A refused reload shows with its reason; the configuration stays.
  rules::Config changed = LoadConfig(kLimitedRule);
  changed.store.max_keys += 1;
  std::string error;
  EXPECT_FALSE(gateway.server().Reload(std::make_shared<const rules::Config>(changed), error));
  Client again(gateway.admin_port());
  const json::object after = json::parse(again.Get("/status.json").body()).as_object();
  EXPECT_EQ(after.at("config").at("last_reload").at("result").as_string(), "failed");
  EXPECT_EQ(after.at("config").at("last_reload").at("error").as_string(), error);
  EXPECT_EQ(after.at("config").at("generation").as_int64(), 1);
}

TEST(StatusPage, ChartsRenderInHeadlessChromium) {
  ASSERT_EQ(std::system("command -v chromium >/dev/null"), 0)
      << "chromium is missing: scripts/deps.sh installs it";
  auto echo = StartEcho();
  TestGateway gateway(BasicConfig(kLimitedRule), echo->port(), TestClock::kSteady);
  Client client(gateway.port());
  for (int i = 0; i < 10; ++i) client.Get("/x");
  WaitForStatus(gateway.admin_port(), [](const json::object& d) {
    return RuleNamed(d, "per-ip").at("limited_last_minute").as_int64() == 7;
  });
  TempDir profile;
  // --virtual-time-budget: the page's scripts run (and fetch) before the DOM is dumped.
  std::string dom;
  RunCommand(
      "chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage "
      "--user-data-dir=" +
          profile.path() +
          " --virtual-time-budget=3000 --dump-dom "
          "http://127.0.0.1:" +
          std::to_string(gateway.admin_port()) + "/ 2>/dev/null",
      "", dom);
  ASSERT_NE(dom.find("data-updates="), std::string::npos) << dom;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      dom, m,
      std::regex(
          R"re(<svg[^>]*data-rule="per-ip"[^>]*data-allowed="(\d+)" data-limited="(\d+)" data-max="(\d+)")re")))
      << dom;
  EXPECT_EQ(m[1], "3");
  EXPECT_EQ(m[2], "7");
  // The limited line rises above the axis somewhere: real data was drawn.
  std::smatch line;
  ASSERT_TRUE(std::regex_search(dom, line,
                                std::regex(R"re(<polyline class="limited" points="([^"]+)")re")));
  std::set<std::string> ys;
  const std::string points = line[1];
  const std::regex y(R"(,([\d.]+))");
  for (std::sregex_iterator it(points.begin(), points.end(), y), end; it != end; ++it) {
    ys.insert((*it)[1]);
  }
  EXPECT_GE(ys.size(), 2u) << points;
  // Both axes drawn and labelled with their units: time in seconds before
  // now on x, requests per second on y, whose top tick is the chart's scale.
  const std::size_t chart_end = dom.find("</svg>", static_cast<std::size_t>(m.position(0)));
  ASSERT_NE(chart_end, std::string::npos);
  const std::string chart = dom.substr(static_cast<std::size_t>(m.position(0)),
                                       chart_end - static_cast<std::size_t>(m.position(0)));
  for (const std::string& drawn :
       {std::string(R"(<line class="axis x")"), std::string(R"(<line class="axis y")"),
        std::string(R"(<text class="axis-label x"[^>]*>time \(s\)</text>)"),
        std::string(R"(<text class="axis-label y"[^>]*>req/s</text>)"),
        std::string(R"(<text class="tick-label x"[^>]*>-60</text>)"),
        std::string(R"(<text class="tick-label x"[^>]*>now</text>)"),
        std::string(R"(<text class="tick-label y"[^>]*>0</text>)"),
        R"(<text class="tick-label y"[^>]*>)" + m[3].str() + "</text>"}) {
    EXPECT_TRUE(std::regex_search(chart, std::regex(drawn))) << drawn << "\n" << chart;
  }
  // The top-limited key links to its state in the admin API.
  EXPECT_NE(dom.find(R"(<a href="api/v1/keys?rule=per-ip&amp;ip=127.0.0.1")"), std::string::npos)
      << dom;
  EXPECT_NE(dom.find("<code>ip=127.0.0.1</code></a>"), std::string::npos) << dom;
  EXPECT_NE(dom.find(">up<"), std::string::npos);
}

}  // namespace
}  // namespace tollgate::testing
