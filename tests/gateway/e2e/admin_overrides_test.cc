// Overrides through the admin API (gateway/admin/admin_overrides.h): one key
// of a rule decided by other limits (raised or lowered) until the
// override's ttl ends or it is removed, every other key by the rule's; on
// both stores; they survive reloads; on Redis an override set on one
// gateway applies on another; bad input and calls without the token
// change nothing.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <chrono>
#include <functional>
#include <thread>

#include "admin.h"
#include "redis_server.h"
#include "test_support.h"

namespace tollgate::testing {
namespace {

namespace json = boost::json;

// Users name themselves with X-User-Id (127.0.0.1 is a trusted proxy,
// which may pass it on). "per-user" allows 3 an hour, so
// that a key's state under the rule outlives the overrides' ttls; "tokens"
// is a bucket (an override may give it a burst); "conn" keeps no state.
constexpr const char* kRules = R"(
[identity]
trusted_proxies = ["127.0.0.1/32"]
user_header = "X-User-Id"
[[rules]]
name = "per-user"
key = "user"
algorithm = "fixed_window"
limit = 3
window = "1h"
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

Response Admin(std::uint16_t port, const std::string& method, const std::string& target,
               const std::string& body = "", const std::string& token = std::string(kAdminToken)) {
  return AdminRequest(port, method, target, token.empty() ? "" : Bearer(token), body);
}

json::value Parsed(const Response& res) {
  boost::system::error_code ec;
  json::value doc = json::parse(res.body(), ec);
  if (ec) ADD_FAILURE() << "not JSON: " << res.body();
  return doc;
}

std::size_t Listed(std::uint16_t admin, const std::string& query = "") {
  return Parsed(Admin(admin, "GET", "/api/v1/overrides" + query)).at("overrides").as_array().size();
}

// How many of `n` requests of `user` pass (200) before the first 429; the
// rest are not sent.
int Passing(std::uint16_t port, const std::string& user, int n = 20) {
  Client client(port);
  for (int i = 0; i < n; ++i) {
    const Response res = client.Get("/x", "X-User-Id: " + user + "\r\n");
    if (res.result_int() != 200) {
      EXPECT_EQ(res.result_int(), 429) << res.body();
      return i;
    }
  }
  return n;
}

// Polls `check` until it holds: a change on one gateway reaches another by
// its refresh (every 500 ms). Gives up after 30 s, a hang guard only.
bool Eventually(const std::function<bool()>& check) {
  for (int i = 0; i < 3000; ++i) {
    if (check()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return check();
}

// A gateway's configuration with the admin token, on the local store
// (false) or Redis (true).
class Overrides : public ::testing::TestWithParam<bool> {
 protected:
  std::string Config() {
    std::string store;
    if (GetParam()) {
      if (redis_ == nullptr) redis_ = std::make_unique<RedisServer>();
      // time = "client": Redis decides on the gateway's manual clock.
      store = RedisStoreSection("url = \"" + redis_->url() + "\"", "deny", "500ms",
                                "time = \"client\"\n");
    }
    return WithAdminTokenFile(BasicConfig(store + kRules), token_);
  }

  TempDir dir_;
  std::string token_ = dir_.Write("token", std::string(kAdminToken));
  std::unique_ptr<RedisServer> redis_;
};

TEST_P(Overrides, RaiseAndLowerOneKeyUntilTheTtlEnds) {
  auto echo = StartEcho();
  TestGateway gateway(Config(), echo->port());
  const std::uint16_t admin = gateway.admin_port();
  const std::uint16_t port = gateway.port();

  const Response raised = Admin(
      admin, "PUT", "/api/v1/overrides",
      R"({"rule":"per-user","key":{"user":"alice"},"limits":[{"limit":5,"window":"1h"}],"ttl":"1m"})");
  ASSERT_EQ(raised.result_int(), 200) << raised.body();
  // The manual clock is at 1,000,000 ms.
  EXPECT_EQ(raised.body(),
            R"({"override":{"rule":"per-user","key":{"user":"alice"},"limits":[{"limit":5,)"
            R"("window":"1h"}],"expires_unix_ms":1060000,"ttl_ms":60000,"applies":true}})"
            "\n");
  const Response lowered = Admin(
      admin, "PUT", "/api/v1/overrides",
      R"({"rule":"per-user","key":{"user":"bob"},"limits":[{"limit":1,"window":"1h"}],"ttl":"2m"})");
  ASSERT_EQ(lowered.result_int(), 200) << lowered.body();

  EXPECT_EQ(Passing(port, "alice"), 5);
  EXPECT_EQ(Passing(port, "bob"), 1);
  EXPECT_EQ(Passing(port, "carol"), 3);
  // A refusal shows the limit the key was decided by.
  Client client(port);
  EXPECT_EQ(client.Get("/x", "X-User-Id: alice\r\n")["X-RateLimit-Limit"], "5");
  EXPECT_EQ(client.Get("/x", "X-User-Id: carol\r\n")["X-RateLimit-Limit"], "3");

  // Listed in id order; by rule.
  const json::value listed = Parsed(Admin(admin, "GET", "/api/v1/overrides"));
  const json::array& all = listed.at("overrides").as_array();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].at("key").at("user"), "alice");
  EXPECT_EQ(json::serialize(all[1]),
            R"({"rule":"per-user","key":{"user":"bob"},"limits":[{"limit":1,"window":"1h"}],)"
            R"("expires_unix_ms":1120000,"ttl_ms":120000,"applies":true})");
  EXPECT_EQ(Listed(admin, "?rule=per-user"), 2u);
  EXPECT_EQ(Listed(admin, "?rule=tokens"), 0u);

  // A key's state is read under the override's limits, and shows it.
  json::value key = Parsed(Admin(admin, "GET", "/api/v1/keys?rule=per-user&user=alice"));
  EXPECT_EQ(key.at("limited"), true);
  EXPECT_EQ(key.at("windows").at(0).at("limit"), 5);
  EXPECT_EQ(key.at("windows").at(0).at("remaining"), 0);
  EXPECT_EQ(json::serialize(key.at("override")),
            R"({"limits":[{"limit":5,"window":"1h"}],"expires_unix_ms":1060000,"ttl_ms":60000})");
  key = Parsed(Admin(admin, "GET", "/api/v1/keys?rule=per-user&user=carol"));
  EXPECT_EQ(key.at("windows").at(0).at("limit"), 3);
  EXPECT_FALSE(key.as_object().contains("override"));

  // A reset of an overridden key resets the state it is decided by.
  ASSERT_EQ(Admin(admin, "DELETE", "/api/v1/keys?rule=per-user&user=alice").result_int(), 200);
  EXPECT_EQ(Passing(port, "alice"), 5);

  // Alice's override is over at its ttl: she is decided by the rule again,
  // from her state under the rule, which the override left untouched.
  gateway.clock().Advance(60'000);
  EXPECT_EQ(Passing(port, "alice"), 3);
  EXPECT_EQ(Listed(admin), 1u);
  EXPECT_FALSE(Parsed(Admin(admin, "GET", "/api/v1/keys?rule=per-user&user=alice"))
                   .as_object()
                   .contains("override"));

  // Removed by its rule and key parts; a second removal finds none.
  const Response removed = Admin(admin, "DELETE", "/api/v1/overrides?rule=per-user&user=bob");
  ASSERT_EQ(removed.result_int(), 200) << removed.body();
  EXPECT_EQ(Parsed(removed).at("removed").at("key").at("user"), "bob");
  const Response again = Admin(admin, "DELETE", "/api/v1/overrides?rule=per-user&user=bob");
  EXPECT_EQ(again.result_int(), 404);
  EXPECT_EQ(Parsed(again).at("error"), "unknown_override");
  EXPECT_EQ(Passing(port, "bob"), 3);
  EXPECT_EQ(Listed(admin), 0u);
}

TEST_P(Overrides, ABucketsBurstAndAnArrayOfThem) {
  auto echo = StartEcho();
  TestGateway gateway(Config(), echo->port());
  const std::uint16_t admin = gateway.admin_port();
  const Response set = Admin(admin, "PUT", "/api/v1/overrides", R"([
      {"rule":"tokens","key":{"header:X-Api-Key":"k1"},
       "limits":[{"limit":1,"window":"10s","burst":2}],"ttl":"1h"},
      {"rule":"per-user","key":{"user":"dave"},"limits":[{"limit":2,"window":"1h"}],"ttl":"1h"}])");
  ASSERT_EQ(set.result_int(), 200) << set.body();
  const json::value doc = Parsed(set);
  const json::array& shown = doc.at("overrides").as_array();
  ASSERT_EQ(shown.size(), 2u);
  // Header names are shown in lower case, as the key's parts name them.
  EXPECT_EQ(json::serialize(shown[0].at("key")), R"({"header:x-api-key":"k1"})");
  EXPECT_EQ(shown[0].at("limits").at(0).at("burst"), 2);

  Client client(gateway.port());
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(client.Get("/x", "X-Api-Key: k1\r\n").result_int(), 200) << i;
  }
  EXPECT_EQ(client.Get("/x", "X-Api-Key: k1\r\n").result_int(), 429);
  EXPECT_EQ(client.Get("/x", "X-Api-Key: k2\r\n").result_int(), 200);
  EXPECT_EQ(Passing(gateway.port(), "dave"), 2);
  // The header's name in a DELETE's query may be in any case.
  EXPECT_EQ(
      Admin(admin, "DELETE", "/api/v1/overrides?rule=tokens&header:X-API-KEY=k1").result_int(),
      200);
  EXPECT_EQ(Listed(admin), 1u);
}

TEST_P(Overrides, AReloadKeepsThem) {
  auto echo = StartEcho();
  TestGateway gateway(Config(), echo->port());
  const std::uint16_t admin = gateway.admin_port();
  ASSERT_EQ(
      Admin(admin, "PUT", "/api/v1/overrides",
            R"({"rule":"per-user","key":{"user":"erin"},"limits":[{"limit":1,"window":"1h"}],)"
            R"("ttl":"1h"})")
          .result_int(),
      200);
  EXPECT_EQ(Passing(gateway.port(), "erin"), 1);
  rules::LoadResult loaded;
  std::string error;
  auto reload = [&](std::string config) {
    loaded = rules::LoadConfigText(WithEchoPort(std::move(config), echo->port()), "reload.toml");
    ASSERT_TRUE(loaded.errors.empty()) << loaded.errors.front().ToString();
    ASSERT_TRUE(
        gateway.server().Reload(std::make_shared<const rules::Config>(*loaded.config), error))
        << error;
  };
  // The override, and the state it decided her by, are kept.
  ASSERT_NO_FATAL_FAILURE(reload(Config()));
  EXPECT_EQ(Passing(gateway.port(), "erin"), 0);
  EXPECT_EQ(Passing(gateway.port(), "frank"), 3);
  EXPECT_EQ(Listed(admin), 1u);

  // A configuration without the override's rule keeps it, applying to
  // nothing (compiled again within the refresh interval), until one has
  // the rule again.
  auto applies = [&] {
    return Parsed(Admin(admin, "GET", "/api/v1/overrides")).at("overrides").at(0).at("applies");
  };
  std::string renamed = Config();
  const std::string name = "name = \"per-user\"";
  renamed.replace(renamed.find(name), name.size(), "name = \"per-person\"");
  ASSERT_NO_FATAL_FAILURE(reload(renamed));
  EXPECT_TRUE(Eventually([&] { return applies() == false; }));
  EXPECT_EQ(Listed(admin), 1u);
  EXPECT_EQ(Passing(gateway.port(), "erin"), 3);  // per-person's limit
  ASSERT_NO_FATAL_FAILURE(reload(Config()));
  EXPECT_TRUE(Eventually([&] { return applies() == true; }));
  // Decided by the override again. (Her state under it is not asserted:
  // the local store frees a rule's states when a configuration drops the
  // rule, Redis keeps them.)
  Passing(gateway.port(), "erin");
  EXPECT_EQ(Client(gateway.port()).Get("/x", "X-User-Id: erin\r\n")["X-RateLimit-Limit"], "1");
}

TEST_P(Overrides, BadInputAndCallsWithoutTheTokenChangeNothing) {
  auto echo = StartEcho();
  TestGateway gateway(Config(), echo->port());
  const std::uint16_t admin = gateway.admin_port();

  const Response unknown = Admin(
      admin, "PUT", "/api/v1/overrides",
      R"({"rule":"nope","key":{"user":"x"},"limits":[{"limit":5,"window":"1m"}],"ttl":"1m"})");
  EXPECT_EQ(unknown.result_int(), 404);
  EXPECT_EQ(Parsed(unknown).at("error"), "unknown_rule");
  EXPECT_EQ(json::serialize(Parsed(unknown).at("rules")), R"(["per-user","tokens","conn"])");

  struct Case {
    std::string body, field;
  };
  const std::string limits = R"("limits":[{"limit":5,"window":"1m"}])";
  for (const Case& c : std::vector<Case>{
           {R"({"rule":"per-user","key":{"ip":"1.2.3.4"},)" + limits + R"(,"ttl":"1m"})", "key.ip"},
           {R"({"rule":"per-user","key":{},)" + limits + R"(,"ttl":"1m"})", "key.user"},
           {R"({"rule":"per-user","key":{"user":""},)" + limits + R"(,"ttl":"1m"})", "key.user"},
           {R"({"rule":"per-user","key":{"user":7},)" + limits + R"(,"ttl":"1m"})", "key.user"},
           {R"({"rule":"per-user",)" + limits + R"(,"ttl":"1m"})", "key"},
           {R"({"key":{"user":"x"},)" + limits + R"(,"ttl":"1m"})", "rule"},
           {R"({"rule":"conn","key":{"ip":"1.2.3.4"},)" + limits + R"(,"ttl":"1m"})", "rule"},
           {R"({"rule":"per-user","key":{"user":"x"},"ttl":"1m"})", "limits"},
           {R"({"rule":"per-user","key":{"user":"x"},"limits":[],"ttl":"1m"})", "limits"},
           {R"({"rule":"per-user","key":{"user":"x"},"limits":[{"limit":0,"window":"1m"}],)"
            R"("ttl":"1m"})",
            "limits[0].limit"},
           {R"({"rule":"per-user","key":{"user":"x"},"limits":[{"limit":"ten","window":"1m"}],)"
            R"("ttl":"1m"})",
            "limits[0].limit"},
           {R"({"rule":"per-user","key":{"user":"x"},"limits":[{"window":"1m"}],"ttl":"1m"})",
            "limits[0].limit"},
           {R"({"rule":"per-user","key":{"user":"x"},"limits":[{"limit":5,"window":"soon"}],)"
            R"("ttl":"1m"})",
            "limits[0].window"},
           {R"({"rule":"per-user","key":{"user":"x"},"limits":[{"limit":5,"window":"1m",)"
            R"("burst":9}],"ttl":"1m"})",
            "limits[0].burst"},
           {R"({"rule":"per-user","key":{"user":"x"},"limits":[{"limit":5,"window":"1m",)"
            R"("per":"day"}],"ttl":"1m"})",
            "limits[0].per"},
           {R"({"rule":"per-user","key":{"user":"x"},)" + limits + "}", "ttl"},
           {R"({"rule":"per-user","key":{"user":"x"},)" + limits + R"(,"ttl":"forever"})", "ttl"},
           {R"({"rule":"per-user","key":{"user":"x"},)" + limits + R"(,"ttl":"-1m"})", "ttl"},
           {R"({"rule":"per-user","key":{"user":"x"},)" + limits + R"(,"ttl":"106751991167d"})",
            "ttl"},
           {R"({"rule":"per-user","key":{"user":"x"},)" + limits +
                R"(,"ttl":"9223372036854775807ms"})",
            "ttl"},
           {R"({"rule":"per-user","key":{"user":"x"},"limits":[{"limit":5,"window":"36501d"}],)"
            R"("ttl":"1m"})",
            "limits[0].window"},
           {R"({"rule":"per-user","key":{"user":"x"},)" + limits + R"(,"ttl":"1m","colour":1})",
            "colour"},
           {"not json", "body"},
           {"[]", "body"},
           // All or none: the first of the array is not applied either.
           {R"([{"rule":"per-user","key":{"user":"x"},)" + limits +
                R"(,"ttl":"1m"},{"rule":"per-user","key":{"user":"y"},"limits":[{"limit":0,)"
                R"("window":"1m"}],"ttl":"1m"}])",
            "[1].limits[0].limit"},
       }) {
    const Response res = Admin(admin, "PUT", "/api/v1/overrides", c.body);
    EXPECT_EQ(res.result_int(), 400) << c.body << ": " << res.body();
    const json::value doc = Parsed(res);
    EXPECT_EQ(doc.at("error"), "bad_request") << c.body;
    EXPECT_EQ(doc.at("field").as_string(), c.field) << c.body << ": " << res.body();
  }

  // Over 64 KiB: 413, refused on its announced length (the body is not
  // sent: the listener closes without reading it).
  Client client(admin);
  client.Send("PUT /api/v1/overrides HTTP/1.1\r\nHost: admin\r\n" + Bearer() +
              "Content-Length: " + std::to_string(64 * 1024 + 1) + "\r\n\r\n");
  const Response large = client.Read();
  EXPECT_EQ(large.result_int(), 413);
  EXPECT_EQ(Parsed(large).at("error"), "body_too_large");

  const std::string good = R"({"rule":"per-user","key":{"user":"x"},)" + limits + R"(,"ttl":"1m"})";
  const Response method = Admin(admin, "POST", "/api/v1/overrides", good);
  EXPECT_EQ(method.result_int(), 405);
  EXPECT_EQ(method[http::field::allow], "GET, HEAD, PUT, DELETE");

  // Without the token, or with another: 401, for changes and reads.
  EXPECT_EQ(Admin(admin, "PUT", "/api/v1/overrides", good, "").result_int(), 401);
  EXPECT_EQ(Admin(admin, "PUT", "/api/v1/overrides", good, std::string(kAdminToken) + "x").result_int(),
            401);
  EXPECT_EQ(Admin(admin, "GET", "/api/v1/overrides", "", "").result_int(), 401);

  EXPECT_EQ(Listed(admin), 0u);
  EXPECT_EQ(Passing(gateway.port(), "x"), 3);
  EXPECT_EQ(Passing(gateway.port(), "y"), 3);

  // A removal names its rule; one of nothing is 404.
  const Response no_rule = Admin(admin, "DELETE", "/api/v1/overrides?user=x");
  EXPECT_EQ(no_rule.result_int(), 400);
  EXPECT_EQ(Parsed(no_rule).at("field"), "rule");
  EXPECT_EQ(Admin(admin, "DELETE", "/api/v1/overrides?rule=per-user&user=x").result_int(), 404);

  // With a token configured, a change without it is refused after a real
  // one too: the override set stays as it was.
  ASSERT_EQ(Admin(admin, "PUT", "/api/v1/overrides", good).result_int(), 200);
  EXPECT_EQ(Admin(admin, "DELETE", "/api/v1/overrides?rule=per-user&user=x", "", "").result_int(),
            401);
  EXPECT_EQ(Listed(admin), 1u);
}

INSTANTIATE_TEST_SUITE_P(Stores, Overrides, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Redis" : "Local";
                         });

// Without a token, on a loopback admin address: overrides can be listed,
// not changed.
TEST(OverridesNoToken, ListedButNotChanged) {
  auto echo = StartEcho();
  TestGateway gateway(BasicConfig(kRules), echo->port());
  const std::uint16_t admin = gateway.admin_port();
  const Response put = Admin(
      admin, "PUT", "/api/v1/overrides",
      R"({"rule":"per-user","key":{"user":"x"},"limits":[{"limit":5,"window":"1m"}],"ttl":"1m"})",
      "");
  EXPECT_EQ(put.result_int(), 403);
  EXPECT_EQ(Parsed(put).at("error"), "forbidden");
  EXPECT_EQ(Admin(admin, "DELETE", "/api/v1/overrides?rule=per-user&user=x", "", "").result_int(),
            403);
  const Response list = Admin(admin, "GET", "/api/v1/overrides", "", "");
  EXPECT_EQ(list.result_int(), 200);
  EXPECT_EQ(Parsed(list).at("overrides").as_array().size(), 0u);
}

// Two gateways on one Redis: an override set through either applies on
// both within a second (each reads the shared hash again when its version
// moves, every 500 ms), ends at its ttl by each one's clock, and a removal
// reaches the other too.
TEST(OverridesOnRedis, SharedByEveryGateway) {
  RedisServer redis;
  TempDir dir;
  const std::string token = dir.Write("token", std::string(kAdminToken));
  auto echo = StartEcho();
  const std::string config = WithAdminTokenFile(
      BasicConfig(RedisStoreSection("url = \"" + redis.url() + "\"", "deny", "500ms",
                                    "time = \"client\"\n") +
                  kRules),
      token);
  TestGateway a(config, echo->port());
  TestGateway b(config, echo->port());
  ASSERT_EQ(
      Admin(a.admin_port(), "PUT", "/api/v1/overrides",
            R"({"rule":"per-user","key":{"user":"gina"},"limits":[{"limit":1,"window":"1h"}],)"
            R"("ttl":"1m"})")
          .result_int(),
      200);
  // The decision state is shared too: one request through either gateway
  // uses gina's one.
  auto lowered_on = [&](TestGateway& g) {
    const Response res = Client(g.port()).Get("/x", "X-User-Id: gina\r\n");
    return res.result_int() == 429 && res["X-RateLimit-Limit"] == "1";
  };
  EXPECT_EQ(Client(a.port()).Get("/x", "X-User-Id: gina\r\n").result_int(), 200);
  EXPECT_TRUE(lowered_on(a));
  // Polled by the list, not by gina's requests: those b decides before it
  // has the override would use up her state under the rule.
  EXPECT_TRUE(Eventually([&] { return Listed(b.admin_port()) == 1; }));
  EXPECT_TRUE(lowered_on(b));

  // Set through b, seen on a.
  ASSERT_EQ(Admin(b.admin_port(), "PUT", "/api/v1/overrides",
                  R"({"rule":"per-user","key":{"user":"hal"},"limits":[{"limit":6,"window":"1h"}],)"
                  R"("ttl":"1h"})")
                .result_int(),
            200);
  EXPECT_TRUE(Eventually([&] { return Listed(a.admin_port()) == 2; }));
  EXPECT_EQ(Passing(a.port(), "hal"), 6);

  // Gina's ends at its ttl by b's clock (a's has not moved).
  b.clock().Advance(60'000);
  EXPECT_EQ(Passing(b.port(), "gina"), 3);
  EXPECT_EQ(Listed(b.admin_port()), 1u);

  // Removed through a, gone on b.
  ASSERT_EQ(
      Admin(a.admin_port(), "DELETE", "/api/v1/overrides?rule=per-user&user=hal").result_int(),
      200);
  EXPECT_TRUE(Eventually([&] { return Listed(b.admin_port()) == 0; }));
}

}  // namespace
}  // namespace tollgate::testing
