// Blocks through the admin API (gateway/admin/admin_blocks.h): requests from
// a network (IPv4 and IPv6), a user or with a header value are refused
// before any rule with 403 {"error":"blocked"} and Retry-After, until the
// block's ttl ends or it is removed; they survive reloads; on Redis a
// block set on one gateway applies on another.
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

// Clients name themselves through X-Forwarded-For (127.0.0.1 is a trusted
// proxy) and X-User-Id; every request passes the rule unless blocked.
constexpr const char* kIdentity = R"(
[identity]
trusted_proxies = ["127.0.0.1/32"]
user_header = "X-User-Id"
[[rules]]
name = "per-ip"
key = "ip"
algorithm = "fixed_window"
limit = 1000
window = "1m"
)";

class Blocks : public ::testing::Test {
 protected:
  // A gateway's configuration with the admin token and `store` (a [store]
  // section, or nothing for the local store).
  std::string Config(const std::string& store = "") {
    return WithAdminTokenFile(BasicConfig(store + kIdentity), token_);
  }

  TempDir dir_;
  std::string token_ = dir_.Write("token", std::string(kAdminToken));
};

Response Admin(std::uint16_t port, const std::string& method, const std::string& target,
               const std::string& body = "", bool token = true) {
  return AdminRequest(port, method, target, token ? Bearer() : "", body);
}

// A request from `client_ip` (through the trusted proxy), with `headers`.
Response From(std::uint16_t port, const std::string& client_ip, const std::string& headers = "") {
  Client client(port);
  return client.Get("/x", "X-Forwarded-For: " + client_ip + "\r\n" + headers);
}

TEST_F(Blocks, ByNetworkUserAndHeaderUntilTheTtlEnds) {
  auto echo = StartEcho();
  TestGateway gateway(Config(), echo->port());
  const std::uint16_t admin = gateway.admin_port();
  const std::uint16_t port = gateway.port();
  for (const std::string body : {
           R"({"ip":"203.0.113.0/24","ttl":"1m"})",
           R"({"ip":"2001:db8::/32","ttl":"2m","status":451})",
           R"({"user":"mallory","ttl":"1h"})",
           R"({"header":{"X-Api-Key":"stolen"},"ttl":"10s"})",
       }) {
    const Response res = Admin(admin, "PUT", "/api/v1/blocks", body);
    ASSERT_EQ(res.result_int(), 200) << body << ": " << res.body();
  }
  const Response blocked = From(port, "203.0.113.9");
  EXPECT_EQ(blocked.result_int(), 403);
  EXPECT_EQ(blocked[http::field::retry_after], "60");
  EXPECT_EQ(json::parse(blocked.body()).at("error"), "blocked");
  EXPECT_EQ(From(port, "203.0.114.9").result_int(), 200);
  EXPECT_EQ(From(port, "2001:db8:1:2::7").result_int(), 451);
  EXPECT_EQ(From(port, "2001:db9::7").result_int(), 200);
  EXPECT_EQ(From(port, "198.51.100.1", "X-User-Id: mallory\r\n").result_int(), 403);
  EXPECT_EQ(From(port, "198.51.100.1", "X-User-Id: alice\r\n").result_int(), 200);
  EXPECT_EQ(From(port, "198.51.100.1", "x-api-key: stolen\r\n").result_int(), 403);
  EXPECT_EQ(From(port, "198.51.100.1", "X-Api-Key: mine\r\n").result_int(), 200);

  // A key's state shows the block that applies to its parts.
  const json::value key =
      json::parse(Admin(admin, "GET", "/api/v1/keys?rule=per-ip&ip=203.0.113.9").body());
  EXPECT_EQ(key.at("block").at("id"), "ip:203.0.113.0/24");
  EXPECT_FALSE(json::parse(Admin(admin, "GET", "/api/v1/keys?rule=per-ip&ip=198.51.100.1").body())
                   .as_object()
                   .contains("block"));

  const json::value listed = json::parse(Admin(admin, "GET", "/api/v1/blocks").body());
  const json::array& blocks = listed.at("blocks").as_array();
  ASSERT_EQ(blocks.size(), 4u);
  EXPECT_EQ(json::serialize(blocks[0]),
            R"({"id":"ip:203.0.113.0/24","ip":"203.0.113.0/24","status":403,)"
            R"("expires_unix_ms":1060000,"ttl_ms":60000})");
  EXPECT_EQ(blocks[3].at("id"), "header:x-api-key:stolen");

  // The clock moves past the shorter ttls: those blocks are over.
  gateway.clock().Advance(60'000);
  EXPECT_EQ(From(port, "203.0.113.9").result_int(), 200);
  EXPECT_EQ(From(port, "198.51.100.1", "X-Api-Key: stolen\r\n").result_int(), 200);
  EXPECT_EQ(From(port, "2001:db8::7").result_int(), 451);
  EXPECT_EQ(json::parse(Admin(admin, "GET", "/api/v1/blocks").body()).at("blocks").as_array().size(),
            2u);

  // Removed by id; a reload keeps the others.
  EXPECT_EQ(Admin(admin, "DELETE", "/api/v1/blocks?id=user:mallory").result_int(), 200);
  EXPECT_EQ(Admin(admin, "DELETE", "/api/v1/blocks?id=user:mallory").result_int(), 404);
  EXPECT_EQ(From(port, "198.51.100.1", "X-User-Id: mallory\r\n").result_int(), 200);
  rules::LoadResult loaded = rules::LoadConfigText(WithEchoPort(Config(), echo->port()), "b.toml");
  ASSERT_TRUE(loaded.errors.empty());
  std::string error;
  ASSERT_TRUE(gateway.server().Reload(std::make_shared<const rules::Config>(*loaded.config), error))
      << error;
  EXPECT_EQ(From(port, "2001:db8::7").result_int(), 451);
}

TEST_F(Blocks, BadBlocksAndCallsWithoutTheTokenChangeNothing) {
  auto echo = StartEcho();
  TestGateway gateway(Config(), echo->port());
  const std::uint16_t admin = gateway.admin_port();
  struct Case {
    std::string body, field;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"ip":"203.0.113.0/33","ttl":"1m"})", "ip"},
           {R"({"ip":"203.0.113.0/24","user":"x","ttl":"1m"})", "ip"},
           {R"({"ttl":"1m"})", "ip"},
           {R"({"user":"x"})", "ttl"},
           {R"({"user":"x","ttl":"forever"})", "ttl"},
           {R"({"user":"x","ttl":"1m","status":200})", "status"},
           {R"({"user":"x","ttl":"1m","colour":"red"})", "colour"},
           {R"({"header":{"A":"1","B":"2"},"ttl":"1m"})", "header"},
           {R"(["user"])", "[0]"},
           {R"([])", "body"},
           {R"("user")", "body"},
           {R"({"ip":"127.0.0.6/0","ttl":"1m"})", "ip"},
           {R"({"user":"x","ttl":"106751991167d"})", "ttl"},
           {R"({"user":"x","ttl":"9223372036854775807ms"})", "ttl"},
           {R"({"user":"x","ttl":"0.4ms"})", "ttl"},
           {R"({"header":{"X A":"1"},"ttl":"1m"})", "header"},
           {R"({"header":{":path":"/"},"ttl":"1m"})", "header"},
           // One bad block in an array: none of them is set.
           {R"([{"user":"x","ttl":"1m"},{"ip":"bad","ttl":"1m"}])", "[1].ip"},
       }) {
    const Response res = Admin(admin, "PUT", "/api/v1/blocks", c.body);
    EXPECT_EQ(res.result_int(), 400) << c.body;
    EXPECT_EQ(json::parse(res.body()).at("field").as_string(), c.field) << c.body << res.body();
  }
  EXPECT_EQ(Admin(admin, "PUT", "/api/v1/blocks", R"({"user":"x","ttl":"1m"})", false)
                .result_int(),
            401);
  EXPECT_EQ(Admin(admin, "DELETE", "/api/v1/blocks", "", true).result_int(), 400);
  EXPECT_EQ(json::parse(Admin(admin, "GET", "/api/v1/blocks").body()).at("blocks").as_array().size(),
            0u);
  EXPECT_EQ(From(gateway.port(), "198.51.100.1", "X-User-Id: x\r\n").result_int(), 200);
}

// The answers to a ttl too long for any clock and to a network with host
// bits (which masked would block far more than meant) say what is allowed;
// Go's duration forms are durations too.
TEST_F(Blocks, TooLongTtlsAndHostBitsAreRefusedSayingWhy) {
  auto echo = StartEcho();
  TestGateway gateway(Config(), echo->port());
  const std::uint16_t admin = gateway.admin_port();
  Response res = Admin(admin, "PUT", "/api/v1/blocks", R"({"user":"x","ttl":"106751991167d"})");
  EXPECT_EQ(res.result_int(), 400);
  EXPECT_EQ(json::parse(res.body()).at("message").as_string(),
            R"(ttl: must be at most "36500d" (100 years))")
      << res.body();
  res = Admin(admin, "PUT", "/api/v1/blocks", R"({"ip":"127.0.0.6/0","ttl":"1m"})");
  EXPECT_EQ(res.result_int(), 400);
  EXPECT_EQ(json::parse(res.body()).at("message").as_string(),
            R"(ip: "127.0.0.6/0" has host bits set: the network of that prefix is "0.0.0.0/0"; )"
            "write that, or the address alone for one host")
      << res.body();
  EXPECT_EQ(From(gateway.port(), "198.51.100.1").result_int(), 200);
  res = Admin(admin, "PUT", "/api/v1/blocks", R"({"user":"x","ttl":"1m30.5s"})");
  ASSERT_EQ(res.result_int(), 200) << res.body();
  EXPECT_EQ(json::parse(res.body()).at("block").at("ttl_ms").as_int64(), 90'500);
  res = Admin(admin, "PUT", "/api/v1/blocks", R"({"user":"y","ttl":"36500d"})");
  ASSERT_EQ(res.result_int(), 200) << res.body();
  EXPECT_EQ(From(gateway.port(), "198.51.100.1", "X-User-Id: y\r\n").result_int(), 403);
}

// An array of blocks is one change: each block is set (a later one of the
// same id replacing an earlier), and the answer lists them as given.
TEST_F(Blocks, AnArrayOfBlocksIsSetInOneCall) {
  auto echo = StartEcho();
  TestGateway gateway(Config(), echo->port());
  const Response res = Admin(gateway.admin_port(), "PUT", "/api/v1/blocks",
                             R"([{"ip":"203.0.113.0/24","ttl":"1h"},)"
                             R"({"user":"mallory","ttl":"10m","status":451},)"
                             R"({"header":{"X-Api-Key":"leaked"},"ttl":"1d"},)"
                             R"({"user":"mallory","ttl":"10m","status":429}])");
  ASSERT_EQ(res.result_int(), 200) << res.body();
  const json::value doc = json::parse(res.body());
  const json::array& answered = doc.at("blocks").as_array();
  ASSERT_EQ(answered.size(), 4u);
  EXPECT_EQ(answered[1].at("id").as_string(), "user:mallory");
  EXPECT_EQ(answered[3].at("status").as_int64(), 429);
  const json::array listed =
      json::parse(Admin(gateway.admin_port(), "GET", "/api/v1/blocks").body())
          .at("blocks")
          .as_array();
  EXPECT_EQ(listed.size(), 3u);
  EXPECT_EQ(From(gateway.port(), "203.0.113.7").result_int(), 403);
  EXPECT_EQ(From(gateway.port(), "198.51.100.1", "X-User-Id: mallory\r\n").result_int(), 429);
  EXPECT_EQ(From(gateway.port(), "198.51.100.1", "X-Api-Key: leaked\r\n").result_int(), 403);
  EXPECT_EQ(From(gateway.port(), "198.51.100.1").result_int(), 200);
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

TEST_F(Blocks, SharedThroughRedisByEveryGateway) {
  RedisServer redis;
  auto echo = StartEcho();
  const std::string store =
      RedisStoreSection("url = \"" + redis.url() + "\"", "deny", "500ms", "time = \"client\"\n");
  TestGateway a(Config(store), echo->port());
  TestGateway b(Config(store), echo->port());
  ASSERT_EQ(Admin(a.admin_port(), "PUT", "/api/v1/blocks", R"({"ip":"203.0.113.0/24","ttl":"1m"})")
                .result_int(),
            200);
  // An array's blocks too, in one script call.
  ASSERT_EQ(Admin(a.admin_port(), "PUT", "/api/v1/blocks",
                  R"([{"user":"u1","ttl":"1m"},{"user":"u2","ttl":"1m"}])")
                .result_int(),
            200);
  EXPECT_TRUE(Eventually([&] {
    return From(b.port(), "198.51.100.1", "X-User-Id: u2\r\n").result_int() == 403;
  }));
  // At once on the gateway that took the call, and soon on the other.
  EXPECT_EQ(From(a.port(), "203.0.113.9").result_int(), 403);
  EXPECT_TRUE(Eventually([&] { return From(b.port(), "203.0.113.9").result_int() == 403; }));
  EXPECT_EQ(json::parse(Admin(b.admin_port(), "GET", "/api/v1/blocks").body())
                .at("blocks")
                .as_array()
                .size(),
            3u);
  // A block ends at its ttl on every gateway's clock.
  b.clock().Advance(60'000);
  EXPECT_EQ(From(b.port(), "203.0.113.9").result_int(), 200);
  // Removed on the other gateway.
  ASSERT_EQ(Admin(b.admin_port(), "DELETE", "/api/v1/blocks?id=ip:203.0.113.0/24").result_int(),
            200);
  EXPECT_TRUE(Eventually([&] { return From(a.port(), "203.0.113.9").result_int() == 200; }));
}

}  // namespace
}  // namespace tollgate::testing
