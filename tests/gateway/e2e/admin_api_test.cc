// The admin API (gateway/admin/admin_api.h) on a real gateway's admin
// listener: who may call it (admin_auth.h), its routing and its JSON errors.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <csignal>
#include <cstdlib>

#include "gateway/admin/admin_auth.h"
#include "admin.h"
#include "redis_server.h"
#include "test_support.h"

namespace tollgate::testing {
namespace {

namespace json = boost::json;

// Rules of each kind: a header key, a composite key with two windows, a
// single token_bucket window (Redis keeps its state in another format), and
// a concurrency rule (no rate-limit state).
constexpr const char* kKeyRules = R"(
[[rules]]
name = "per-key"
key = "header:X-Api-Key"
algorithm = "fixed_window"
limit = 3
window = "1m"
[[rules]]
name = "per-ip-route"
key = ["ip", "route"]
algorithm = "sliding_log"
limits = [ { limit = 5, window = "1s" }, { limit = 100, window = "1h" } ]
[[rules]]
name = "tokens"
key = "header:X-Api-Key"
algorithm = "token_bucket"
limit = 10
window = "10s"
[[rules]]
name = "conn"
key = "ip"
max_inflight = 3
)";

// A gateway whose [admin] section is `admin` (its address included).
std::string AdminConfig(const std::string& admin) {
  std::string config = BasicConfig(kKeyRules);
  const std::string from = "[admin]\naddress = \"127.0.0.1:0\"\n";
  config.replace(config.find(from), from.size(), "[admin]\n" + admin + "\n");
  return config;
}

json::object Body(const Response& res) {
  EXPECT_EQ(res[http::field::content_type], "application/json") << res.body();
  boost::system::error_code ec;
  json::value doc = json::parse(res.body(), ec);
  if (ec || !doc.is_object()) {
    ADD_FAILURE() << "not a JSON object: " << res.body();
    return {};
  }
  return doc.as_object();
}

class TokenFile : public ::testing::Test {
 protected:
  TempDir dir_;
  std::string file_ = dir_.Write("token", std::string(kAdminToken) + "\n");
};

TEST(AdminApiNoToken, LoopbackAnswersReadsAndRefusesChanges) {
  auto echo = StartEcho();
  TestGateway gateway(AdminConfig("address = \"127.0.0.1:0\""), echo->port());
  const Response rules = AdminRequest(gateway.admin_port(), "GET", "/api/v1/rules");
  ASSERT_EQ(rules.result_int(), 200) << rules.body();
  const json::object doc = Body(rules);
  const json::array& list = doc.at("rules").as_array();
  ASSERT_EQ(list.size(), 4u);
  EXPECT_EQ(json::serialize(list[0]),
            R"({"name":"per-key","key":["header:X-Api-Key"],"limits":[{"algorithm":"fixed_window",)"
            R"("limit":3,"window":"1m","window_ms":60000}],"cost":1,"per":"request",)"
            R"("action":"reject","status":429})");
  EXPECT_EQ(json::serialize(list[1].at("key")), R"(["ip","route"])");
  EXPECT_EQ(list[1].at("limits").as_array().size(), 2u);
  EXPECT_EQ(json::serialize(list[2].at("limits")),
            R"([{"algorithm":"token_bucket","limit":10,"window":"10s","window_ms":10000,)"
            R"("burst":10}])");
  EXPECT_EQ(json::serialize(list[3]), R"({"name":"conn","key":["ip"],"max_inflight":3})");

  const Response change = AdminRequest(gateway.admin_port(), "DELETE", "/api/v1/rules");
  EXPECT_EQ(change.result_int(), 403);
  EXPECT_EQ(Body(change).at("error"), "forbidden");
}

TEST(AdminApiNoToken, NonLoopbackAddressRefusesEverything) {
  auto echo = StartEcho();
  TestGateway gateway(AdminConfig("address = \"0.0.0.0:0\""), echo->port());
  const Response res = AdminRequest(gateway.admin_port(), "GET", "/api/v1/rules");
  EXPECT_EQ(res.result_int(), 403);
  EXPECT_EQ(Body(res).at("error"), "forbidden");
  // What the admin listener offered before stays as it was.
  EXPECT_EQ(AdminRequest(gateway.admin_port(), "GET", "/healthz").result_int(), 200);
  EXPECT_EQ(AdminRequest(gateway.admin_port(), "GET", "/metrics").result_int(), 200);
}

TEST_F(TokenFile, EveryCallNeedsTheToken) {
  auto echo = StartEcho();
  TestGateway gateway(AdminConfig("address = \"0.0.0.0:0\"\ntoken_file = \"" + file_ + "\""),
                      echo->port());
  const std::uint16_t port = gateway.admin_port();
  const Response none = AdminRequest(port, "GET", "/api/v1/rules");
  EXPECT_EQ(none.result_int(), 401);
  EXPECT_EQ(none[http::field::www_authenticate], "Bearer");
  EXPECT_EQ(Body(none).at("error"), "unauthorized");
  EXPECT_EQ(AdminRequest(port, "GET", "/api/v1/rules", Bearer("wrong")).result_int(), 401);
  EXPECT_EQ(AdminRequest(port, "GET", "/api/v1/rules", Bearer(std::string(kAdminToken) + "x")).result_int(),
            401);
  EXPECT_EQ(AdminRequest(port, "GET", "/api/v1/rules", "Authorization: Basic " + std::string(kAdminToken) +
                                                   "\r\n")
                .result_int(),
            401);
  EXPECT_EQ(AdminRequest(port, "GET", "/api/v1/rules", Bearer(kAdminToken)).result_int(), 200);
  EXPECT_EQ(AdminRequest(port, "GET", "/api/v1/rules",
                 "Authorization: bearer " + std::string(kAdminToken) + "\r\n")
                .result_int(),
            200);
  // The status page and /metrics keep working without it.
  EXPECT_EQ(AdminRequest(port, "GET", "/metrics").result_int(), 200);
  EXPECT_EQ(AdminRequest(port, "GET", "/status.json").result_int(), 200);
}

TEST_F(TokenFile, RoutingAndErrorsAreJson) {
  auto echo = StartEcho();
  TestGateway gateway(AdminConfig("address = \"127.0.0.1:0\"\ntoken_file = \"" + file_ + "\""),
                      echo->port());
  const std::uint16_t port = gateway.admin_port();
  const Response unknown = AdminRequest(port, "GET", "/api/v1/nothing", Bearer(kAdminToken));
  EXPECT_EQ(unknown.result_int(), 404);
  EXPECT_EQ(Body(unknown).at("error"), "not_found");
  const Response method = AdminRequest(port, "POST", "/api/v1/rules", Bearer(kAdminToken), "{}");
  EXPECT_EQ(method.result_int(), 405);
  EXPECT_EQ(method[http::field::allow], "GET, HEAD");
  EXPECT_EQ(Body(method).at("error"), "method_not_allowed");
  // Refused on its announced length, before it is sent.
  Client client(port);
  client.Send("PUT /api/v1/rules HTTP/1.1\r\nHost: admin\r\n" + Bearer(kAdminToken) +
              "Content-Length: " + std::to_string(64 * 1024 + 1) + "\r\n\r\n");
  const Response large = client.Read();
  EXPECT_EQ(large.result_int(), 413);
  EXPECT_EQ(Body(large).at("error"), "body_too_large");
  // Headers beyond the limit: 431, then the connection closes.
  Client headers(port);
  headers.Send("GET /api/v1/rules HTTP/1.1\r\nHost: admin\r\n" + Bearer(kAdminToken) +
               "X-Filler: " + std::string(64 * 1024, 'a') + "\r\n\r\n");
  const Response too_many = headers.Read();
  EXPECT_EQ(too_many.result_int(), 431);
  EXPECT_EQ(Body(too_many).at("error"), "header_too_large");
  EXPECT_FALSE(too_many.keep_alive());
}

TEST(AdminApiConfig, TokenFromTheEnvironmentAndItsLength) {
  setenv("TOLLGATE_TEST_ADMIN_TOKEN", std::string(kAdminToken).c_str(), 1);
  rules::LoadResult loaded = rules::LoadConfigText(
      WithEchoPort(AdminConfig("token_env = \"TOLLGATE_TEST_ADMIN_TOKEN\""), 9), "admin.toml");
  ASSERT_TRUE(loaded.errors.empty()) << loaded.errors.front().ToString();
  EXPECT_EQ(loaded.config->admin.token, kAdminToken);

  setenv("TOLLGATE_TEST_ADMIN_TOKEN", "too-short", 1);
  loaded = rules::LoadConfigText(
      WithEchoPort(AdminConfig("token_env = \"TOLLGATE_TEST_ADMIN_TOKEN\""), 9), "admin.toml");
  ASSERT_EQ(loaded.errors.size(), 1u);
  EXPECT_NE(loaded.errors[0].message.find("at least 32 bytes"), std::string::npos)
      << loaded.errors[0].ToString();
  unsetenv("TOLLGATE_TEST_ADMIN_TOKEN");
  loaded = rules::LoadConfigText(
      WithEchoPort(AdminConfig("token_env = \"TOLLGATE_TEST_ADMIN_TOKEN\""), 9), "admin.toml");
  ASSERT_EQ(loaded.errors.size(), 1u);
  EXPECT_NE(loaded.errors[0].message.find("is not set"), std::string::npos);
}

// GET and DELETE /api/v1/keys: the same answers from both stores (Redis
// with time = "client" decides on the gateway's manual clock, as the local
// store does).
class AdminKeys : public ::testing::TestWithParam<bool> {
 protected:
  // The gateway's configuration: Redis when the parameter says so.
  std::string Config() {
    if (!GetParam()) return BasicConfig(kKeyRules);
    redis_ = std::make_unique<RedisServer>();
    return BasicConfig(RedisStoreSection("url = \"" + redis_->url() + "\"", "deny", "500ms",
                                         "time = \"client\"\n") +
                       kKeyRules);
  }
  std::unique_ptr<RedisServer> redis_;
};

json::object Window(const json::object& doc, std::size_t i) {
  return doc.at("windows").as_array().at(i).as_object();
}

TEST_P(AdminKeys, InspectAndResetAKey) {
  auto echo = StartEcho();
  TestGateway gateway(Config(), echo->port());
  const std::uint16_t admin = gateway.admin_port();
  Client client(gateway.port());
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(client.Get("/x", "X-Api-Key: k1\r\n").result_int(), 200);
  }
  const Response fixed = AdminRequest(admin, "GET", "/api/v1/keys?rule=per-key&header:x-api-key=k1");
  ASSERT_EQ(fixed.result_int(), 200) << fixed.body();
  json::object doc = Body(fixed);
  EXPECT_EQ(doc.at("rule"), "per-key");
  EXPECT_EQ(doc.at("store"), GetParam() ? "redis" : "local");
  EXPECT_EQ(doc.at("limited"), false);
  // The manual clock is at 1,000,000 ms: the 1-minute window ends at 1,020,000.
  EXPECT_EQ(json::serialize(doc.at("windows")),
            R"([{"algorithm":"fixed_window","limit":3,"window":"1m","remaining":1,)"
            R"("reset_ms":20000,"retry_after_ms":0,"state":{"count":2}}])");
  doc = Body(AdminRequest(admin, "GET", "/api/v1/keys?rule=tokens&header%3AX-Api-Key=k1"));
  EXPECT_EQ(json::serialize(doc.at("windows")),
            R"([{"algorithm":"token_bucket","limit":10,"window":"10s","remaining":8,)"
            R"("reset_ms":2000,"retry_after_ms":0,)"
            R"("state":{"level":80000,"units_per_token":10000}}])");
  doc = Body(AdminRequest(admin, "GET", "/api/v1/keys?rule=per-ip-route&ip=127.0.0.1&route=/"));
  EXPECT_EQ(doc.at("key"), "ip=127.0.0.1 route=/");
  EXPECT_EQ(Window(doc, 0).at("remaining"), 3);
  EXPECT_EQ(Window(doc, 0).at("reset_ms"), 1000);
  EXPECT_EQ(Window(doc, 1).at("remaining"), 98);
  EXPECT_EQ(Window(doc, 1).at("reset_ms"), 3'600'000);
  // The algorithm's own state: the log's length in each window.
  EXPECT_EQ(json::serialize(Window(doc, 0).at("state")), R"({"log_length":2})");
  EXPECT_EQ(json::serialize(Window(doc, 1).at("state")), R"({"log_length":2})");
  // A key never seen is fresh.
  doc = Body(AdminRequest(admin, "GET", "/api/v1/keys?rule=per-key&header:X-Api-Key=other"));
  EXPECT_EQ(Window(doc, 0).at("remaining"), 3);

  ASSERT_EQ(client.Get("/x", "X-Api-Key: k1\r\n").result_int(), 200);
  ASSERT_EQ(client.Get("/x", "X-Api-Key: k1\r\n").result_int(), 429);
  gateway.clock().Advance(5000);
  doc = Body(AdminRequest(admin, "GET", "/api/v1/keys?rule=per-key&header:X-Api-Key=k1"));
  EXPECT_EQ(doc.at("limited"), true);
  EXPECT_EQ(Window(doc, 0).at("remaining"), 0);
  EXPECT_EQ(Window(doc, 0).at("retry_after_ms"), 15000);

  // DELETE needs a token; with one it resets the key, and the key's
  // requests pass again.
  EXPECT_EQ(AdminRequest(admin, "DELETE", "/api/v1/keys?rule=per-key&header:X-Api-Key=k1").result_int(),
            403);
  EXPECT_EQ(client.Get("/x", "X-Api-Key: k1\r\n").result_int(), 429);
}

TEST_P(AdminKeys, ResetWithAToken) {
  TempDir dir;
  const std::string token = dir.Write("token", std::string(kAdminToken));
  auto echo = StartEcho();
  TestGateway gateway(WithAdminTokenFile(Config(), token), echo->port());
  const std::uint16_t admin = gateway.admin_port();
  Client client(gateway.port());
  for (int i = 0; i < 3; ++i) ASSERT_EQ(client.Get("/x", "X-Api-Key: k1\r\n").result_int(), 200);
  ASSERT_EQ(client.Get("/x", "X-Api-Key: k1\r\n").result_int(), 429);
  const std::string url = "/api/v1/keys?rule=per-key&header:X-Api-Key=k1";
  EXPECT_EQ(AdminRequest(admin, "DELETE", url, Bearer("wrong-token")).result_int(), 401);
  EXPECT_EQ(client.Get("/x", "X-Api-Key: k1\r\n").result_int(), 429);  // nothing changed
  const Response reset = AdminRequest(admin, "DELETE", url, Bearer(kAdminToken));
  ASSERT_EQ(reset.result_int(), 200) << reset.body();
  EXPECT_EQ(Body(reset).at("reset"), true);
  EXPECT_EQ(Window(Body(AdminRequest(admin, "GET", url, Bearer(kAdminToken))), 0).at("remaining"), 3);
  gateway.clock().Advance(1000);  // per-ip-route's 5 per second are used up too
  EXPECT_EQ(client.Get("/x", "X-Api-Key: k1\r\n").result_int(), 200);
  // Another rule's state of the same key is left alone.
  const json::object tokens =
      Body(AdminRequest(admin, "GET", "/api/v1/keys?rule=tokens&header:X-Api-Key=k1", Bearer(kAdminToken)));
  EXPECT_EQ(Window(tokens, 0).at("remaining"), 5);  // 6 taken, 1 refilled
}

TEST_P(AdminKeys, BadQueriesNameTheField) {
  auto echo = StartEcho();
  TestGateway gateway(Config(), echo->port());
  const std::uint16_t admin = gateway.admin_port();
  const Response unknown = AdminRequest(admin, "GET", "/api/v1/keys?rule=nope&user=alice");
  EXPECT_EQ(unknown.result_int(), 404);
  json::object doc = Body(unknown);
  EXPECT_EQ(doc.at("error"), "unknown_rule");
  EXPECT_EQ(json::serialize(doc.at("rules")), R"(["per-key","per-ip-route","tokens","conn"])");
  struct Case {
    std::string query, field;
  };
  for (const Case& c : std::vector<Case>{
           {"user=alice", "rule"},
           {"rule=per-key&user=alice", "user"},
           {"rule=per-key", "header:X-Api-Key"},
           {"rule=per-ip-route&ip=127.0.0.1", "route"},
           {"rule=per-ip-route&ip=300.1.2.3&route=/", "ip"},
           {"rule=per-ip-route&ip=2001:db8::1/48&route=/", "ip"},
           {"rule=per-key&header:X-Api-Key=", "header:X-Api-Key"},
           {"rule=conn&ip=127.0.0.1", "rule"},
       }) {
    const Response res = AdminRequest(admin, "GET", "/api/v1/keys?" + c.query);
    EXPECT_EQ(res.result_int(), 400) << c.query;
    doc = Body(res);
    EXPECT_EQ(doc.at("field").as_string(), c.field) << c.query << ": " << res.body();
  }
  // An IPv6 client is keyed by its /64 network: either form names it.
  EXPECT_EQ(Body(AdminRequest(admin, "GET", "/api/v1/keys?rule=per-ip-route&ip=2001:db8::1&route=/"))
                .at("key"),
            "ip=2001:db8::/64 route=/");
  EXPECT_EQ(
      AdminRequest(admin, "GET", "/api/v1/keys?rule=per-ip-route&ip=2001:db8::/64&route=/").result_int(),
      200);
}

INSTANTIATE_TEST_SUITE_P(Stores, AdminKeys, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Redis" : "Local";
                         });

// The next line of the real binary's operational log that contains `text`
// ("" at its end).
std::string LineWith(Process& gateway, std::string_view text) {
  for (std::string line = gateway.StderrLine(); !line.empty(); line = gateway.StderrLine()) {
    if (line.find(text) != std::string::npos) return line;
  }
  return {};
}

// The real binary with the admin token in `token_file`, forwarding to
// `echo_port`; `serving` is its "admin on port N ..." line, empty when it
// did not start.
struct Binary {
  std::unique_ptr<Process> process;
  std::string serving;
  std::uint16_t admin = 0;
};

Binary StartBinary(TempDir& dir, const std::string& token_file, std::uint16_t echo_port) {
  const std::string file = dir.Write(
      "gateway.toml",
      WithEchoPort(AdminConfig("address = \"127.0.0.1:0\"\ntoken_file = \"" + token_file + "\""),
                   echo_port));
  Binary binary;
  binary.process =
      std::make_unique<Process>(std::vector<std::string>{TOLLGATE_BINARY, "--config", file});
  binary.serving = LineWith(*binary.process, "admin on port ");
  if (!binary.serving.empty()) {
    binary.admin = static_cast<std::uint16_t>(
        std::stoi(binary.serving.substr(binary.serving.find("admin on port ") + 14)));
  }
  return binary;
}

// Every change is one line of the operational log (who: the token's
// fingerprint and the peer; what; before and after) and counted in
// tollgate_admin_changes_total; refused calls change and log nothing.
TEST_F(TokenFile, ChangesAreAuditedAndCounted) {
  auto echo = StartEcho();
  Binary binary = StartBinary(dir_, file_, echo->port());
  ASSERT_FALSE(binary.serving.empty());
  Process& gateway = *binary.process;
  const std::string& serving = binary.serving;
  const std::uint16_t admin = binary.admin;
  const std::string port_text = serving.substr(serving.find("port(s) ") + 8);
  const auto port = static_cast<std::uint16_t>(std::stoi(port_text));
  const std::string who = "by token " + gateway::TokenFingerprint(kAdminToken) + " from 127.0.0.1:";

  EXPECT_EQ(AdminRequest(admin, "PUT", "/api/v1/blocks", Bearer("wrong"), R"({"user":"x","ttl":"1m"})")
                .result_int(),
            401);
  ASSERT_EQ(AdminRequest(admin, "PUT", "/api/v1/blocks", Bearer(kAdminToken), R"({"user":"mallory","ttl":"1m"})")
                .result_int(),
            200);
  std::string line = LineWith(gateway, "admin change: ");
  EXPECT_NE(line.find("admin change: block id=user:mallory " + who), std::string::npos) << line;
  EXPECT_NE(line.find("; before: null; after: {\"id\":\"user:mallory\""), std::string::npos)
      << line;

  Client client(port);
  ASSERT_EQ(client.Get("/x", "X-Api-Key: k1\r\n").result_int(), 200);
  ASSERT_EQ(AdminRequest(admin, "DELETE", "/api/v1/keys?rule=per-key&header:X-Api-Key=k1", Bearer(kAdminToken))
                .result_int(),
            200);
  line = LineWith(gateway, "admin change: ");
  EXPECT_NE(line.find("admin change: reset rule=per-key key=\"header:X-Api-Key=#"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("; before: [{\"algorithm\":\"fixed_window\",\"limit\":3,\"window\":\"1m\","
                      "\"remaining\":"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("; after: [{\"algorithm\":\"fixed_window\",\"limit\":3,\"window\":\"1m\","
                      "\"remaining\":3,"),
            std::string::npos)
      << line;

  ASSERT_EQ(AdminRequest(admin, "DELETE", "/api/v1/blocks?id=user:mallory", Bearer(kAdminToken)).result_int(),
            200);
  line = LineWith(gateway, "admin change: ");
  EXPECT_NE(line.find("admin change: unblock id=user:mallory " + who), std::string::npos) << line;
  EXPECT_NE(line.find("; after: null"), std::string::npos) << line;

  const std::string metrics = AdminRequest(admin, "GET", "/metrics").body();
  EXPECT_NE(metrics.find("tollgate_admin_changes_total{kind=\"reset\"} 1\n"), std::string::npos);
  EXPECT_NE(metrics.find("tollgate_admin_changes_total{kind=\"block\"} 1\n"), std::string::npos);
  EXPECT_NE(metrics.find("tollgate_admin_changes_total{kind=\"unblock\"} 1\n"), std::string::npos);
  gateway.Signal(SIGTERM);
  EXPECT_EQ(gateway.Wait(), 0);
}

// A block id is the caller's text: a newline in it must not start a line
// of its own in the audit (a forged one), nor a quote or a backslash
// confuse a reader; they are written \xNN as in the access log.
TEST_F(TokenFile, AuditLinesEscapeWhatTheCallerWrote) {
  auto echo = StartEcho();
  Binary binary = StartBinary(dir_, file_, echo->port());
  ASSERT_FALSE(binary.serving.empty());
  Process& gateway = *binary.process;
  const std::uint16_t admin = binary.admin;
  ASSERT_EQ(AdminRequest(admin, "PUT", "/api/v1/blocks", Bearer(kAdminToken),
                 R"({"user":"eve\n[2026-12-02 01:02:03.456] [tollgate] [info] admin change: )"
                 R"(unblock id=user:\"mallory\\","ttl":"1m"})")
                .result_int(),
            200);
  const std::string line = LineWith(gateway, "admin change: ");
  EXPECT_NE(line.find("admin change: block id=user:eve\\x0A[2026-12-02 01:02:03.456] [tollgate] "
                      "[info] admin change: unblock id=user:\\x22mallory\\x5C by token "),
            std::string::npos)
      << line;
  gateway.Signal(SIGTERM);
  EXPECT_EQ(gateway.Wait(), 0);
}

}  // namespace
}  // namespace tollgate::testing
