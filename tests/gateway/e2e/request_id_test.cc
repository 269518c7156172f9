// Request IDs (X-Request-Id, gateway/core/request_id.h) through the real
// proxy: made when absent; replaced when a client that is not a trusted
// proxy sent one, or a trusted proxy's is not valid; kept from a trusted
// proxy. Seen by HTTP/1.1 and HTTP/2 upstreams from HTTP/1.1 and HTTP/2
// clients (curl --http2-prior-knowledge), written in the access log in
// both formats, and carried by every answer tollgate writes itself (its
// X-Request-Id field and the body's "request_id"). Clients connect from
// 127.0.0.1 (not trusted) or 127.0.0.2 (the trusted proxy).
#include "gateway/core/request_id.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json/parse.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "files.h"
#include "test_support.h"

namespace tollgate::testing {
namespace {

namespace json = boost::json;

const std::string kPython = "/usr/bin/python3";
const std::string kScripts = TOLLGATE_HTTP2_SCRIPTS;
constexpr const char* kStranger = "127.0.0.1";
constexpr const char* kProxy = "127.0.0.2";

// 32 lowercase hex digits.
bool IsNewId(std::string_view id) {
  return id.size() == 32 && std::all_of(id.begin(), id.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

TEST(RequestId, NewIdsAreHexAndUniqueAcrossThreads) {
  constexpr int kThreads = 4;
  constexpr int kEach = 20'000;
  std::vector<std::vector<std::string>> made(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&made, t] {
      for (int i = 0; i < kEach; ++i) gateway::AppendNewRequestId(made[t].emplace_back());
    });
  }
  for (auto& thread : threads) thread.join();
  std::set<std::string> all;
  for (const auto& ids : made) {
    for (const std::string& id : ids) {
      ASSERT_TRUE(IsNewId(id)) << id;
      all.insert(id);
    }
  }
  EXPECT_EQ(all.size(), static_cast<std::size_t>(kThreads * kEach));
}

TEST(RequestId, WhatIsKept) {
  EXPECT_TRUE(gateway::ValidRequestId("a"));
  EXPECT_TRUE(gateway::ValidRequestId(std::string(200, '~')));
  EXPECT_TRUE(gateway::ValidRequestId("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}"));
  EXPECT_FALSE(gateway::ValidRequestId(""));
  EXPECT_FALSE(gateway::ValidRequestId(std::string(201, 'a')));
  EXPECT_FALSE(gateway::ValidRequestId("a b"));
  EXPECT_FALSE(gateway::ValidRequestId("a\tb"));
  EXPECT_FALSE(gateway::ValidRequestId("a\x7f"));
  EXPECT_FALSE(gateway::ValidRequestId("\xc3\xa9"));
}

// The echo upstream on "/", a dead upstream on "/down", nothing on "/none"
// is not routed (routes are "/api", "/_test" and "/down"), a limit of 1 a
// minute on "/limited", the access log into `log` in `format`.
std::string Config(const std::string& log, const std::string& format = "combined",
                   const std::string& trusted = kProxy) {
  return R"(
[server]
threads = 1
[[listeners]]
address = "127.0.0.1:0"
[admin]
address = "127.0.0.1:0"
[log]
access = ")" + log + R"("
format = ")" + format + R"("
[identity]
trusted_proxies = [")" + trusted + R"(/32"]
[[upstreams]]
name = "api"
servers = ["127.0.0.1:{ECHO}"]
[[upstreams]]
name = "down"
servers = ["127.0.0.1:1"]
[[routes]]
path_prefix = "/api"
upstream = "api"
[[routes]]
path_prefix = "/_test"
upstream = "api"
[[routes]]
path_prefix = "/limited"
upstream = "api"
[[routes]]
path_prefix = "/down"
upstream = "down"
[[rules]]
name = "one"
key = "ip"
match = { path_prefix = "/limited" }
algorithm = "fixed_window"
limit = 1
window = "1m"
)";
}

class RequestIdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    echo_ = StartEcho();
    log_ = dir_.path() + "/access.log";
  }
  void StartGateway(const std::string& format = "combined", const std::string& trusted = kProxy) {
    gateway_ = std::make_unique<TestGateway>(Config(log_, format, trusted), echo_->port());
  }
  Response Get(const char* from, const std::string& target, const std::string& headers = "") {
    Client client(gateway_->port(), 5000, from);
    return client.Get(target, headers);
  }
  // The X-Request-Id an upstream received (the echo joins repeated lines
  // with ","), in whatever spelling it came.
  static std::string Received(const std::string& body) {
    const json::value fields = json::parse(body);
    for (const auto& [name, value] : fields.as_object()) {
      if (boost::beast::iequals(name, "X-Request-Id")) return std::string(value.as_string());
    }
    return "";
  }
  static std::string Received(const Response& res) { return Received(res.body()); }
  // An answer of tollgate's own: its field and the body's member agree.
  static std::string AnswerId(const Response& res) {
    const std::string field(res["X-Request-Id"]);
    EXPECT_EQ(json::parse(res.body()).at("request_id").as_string(), field) << res;
    return field;
  }
  std::string Curl(const std::string& args) {
    return Shell("curl -sS --http2-prior-knowledge " + args);
  }
  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(gateway_->port()) + path;
  }

  TempDir dir_;
  std::string log_;
  std::unique_ptr<gateway::EchoUpstream> echo_;
  std::unique_ptr<TestGateway> gateway_;
};

TEST_F(RequestIdTest, EveryRequestGetsAnIdOfItsOwn) {
  StartGateway();
  Client client(gateway_->port());
  const std::string first = Received(client.Get("/_test/headers"));
  const std::string second = Received(client.Get("/_test/headers"));
  EXPECT_TRUE(IsNewId(first)) << first;
  EXPECT_TRUE(IsNewId(second)) << second;
  EXPECT_NE(first, second);
}

TEST_F(RequestIdTest, AClientThatIsNotATrustedProxyCannotChooseItsId) {
  StartGateway();
  const std::string id = Received(Get(kStranger, "/_test/headers", "X-Request-Id: chosen\r\n"));
  EXPECT_TRUE(IsNewId(id)) << id;
}

TEST_F(RequestIdTest, ATrustedProxysValidIdIsKeptAndAnInvalidOneReplaced) {
  StartGateway();
  EXPECT_EQ(Received(Get(kProxy, "/_test/headers", "x-request-id: edge-7f3a/1\r\n")),
            "edge-7f3a/1");
  const std::string longest(200, 'a');
  EXPECT_EQ(Received(Get(kProxy, "/_test/headers", "X-Request-Id: " + longest + "\r\n")),
            longest);
  for (const std::string& fields :
       {"X-Request-Id: " + std::string(201, 'a') + "\r\n",  // too long
        std::string("X-Request-Id: two words\r\n"),          // not visible ASCII only
        std::string("X-Request-Id: \xc3\xa9t\xc3\xa9\r\n"),   // nor is UTF-8
        std::string("X-Request-Id: one\r\nX-Request-Id: two\r\n"),  // which one?
        std::string("X-Request-Id:\r\n")}) {
    const std::string id = Received(Get(kProxy, "/_test/headers", fields));
    EXPECT_TRUE(IsNewId(id)) << fields << " -> " << id;
  }
}

TEST_F(RequestIdTest, TollgatesOwnAnswersCarryTheId) {
  StartGateway();
  ASSERT_EQ(Get(kStranger, "/limited").result_int(), 200);
  const Response limited = Get(kStranger, "/limited");
  ASSERT_EQ(limited.result_int(), 429);
  EXPECT_TRUE(IsNewId(AnswerId(limited))) << limited;
  const Response no_route = Get(kStranger, "/none");
  ASSERT_EQ(no_route.result_int(), 404);
  EXPECT_TRUE(IsNewId(AnswerId(no_route))) << no_route;
  const Response down = Get(kStranger, "/down");
  ASSERT_EQ(down.result_int(), 502);
  EXPECT_TRUE(IsNewId(AnswerId(down))) << down;
  // A trusted proxy's ID, even with characters JSON escapes.
  const Response proxied = Get(kProxy, "/none", "X-Request-Id: a\"b\\c\r\n");
  ASSERT_EQ(proxied.result_int(), 404);
  EXPECT_EQ(AnswerId(proxied), "a\"b\\c");
  // A request whose header could not be read has an ID all the same.
  Client bad(gateway_->port());
  bad.Send("GET / HTTP/1.1\r\nHost: x\r\nBad Field: y\r\n\r\n");
  const Response malformed = bad.Read();
  ASSERT_EQ(malformed.result_int(), 400);
  EXPECT_TRUE(IsNewId(AnswerId(malformed))) << malformed;
}

TEST_F(RequestIdTest, TheAccessLogShowsTheId) {
  StartGateway();
  const std::string sent = Received(Get(kStranger, "/_test/headers"));
  ASSERT_EQ(Received(Get(kProxy, "/_test/headers", "X-Request-Id: edge-1\r\n")), "edge-1");
  const std::string refused = AnswerId(Get(kStranger, "/none"));
  gateway_.reset();  // the log is flushed
  const std::string log = ReadFile(log_);
  for (const std::string& id : {sent, std::string("edge-1"), refused}) {
    EXPECT_NE(log.find(" rl=- request_id=" + id), std::string::npos) << id << "\n" << log;
  }
}

TEST_F(RequestIdTest, TheJsonAccessLogShowsTheId) {
  StartGateway("json");
  ASSERT_EQ(Received(Get(kProxy, "/_test/headers", "X-Request-Id: edge-2\r\n")), "edge-2");
  const std::string refused = AnswerId(Get(kStranger, "/none"));
  gateway_.reset();
  std::istringstream lines(ReadFile(log_));
  std::vector<std::string> ids;
  for (std::string line; std::getline(lines, line);) {
    ids.emplace_back(json::parse(line).at("request_id").as_string());
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"edge-2", refused}));
}

// HTTP/2 clients: curl from 127.0.0.1, trusted here or not.
TEST_F(RequestIdTest, Http2ClientsAsHttp1Ones) {
  StartGateway();
  const std::string chosen = "-H 'X-Request-Id: chosen' ";
  const std::string untrusted = Received(Curl(chosen + Url("/_test/headers")));
  EXPECT_TRUE(IsNewId(untrusted)) << untrusted;
  ASSERT_EQ(Curl("-o /dev/null -w '%{http_code}' " + Url("/limited")), "200");
  const std::string limited = Curl("-i " + chosen + Url("/limited"));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(limited, m, std::regex("x-request-id: ([0-9a-f]{32})\r\n")))
      << limited;
  EXPECT_NE(limited.find("\"request_id\":\"" + m[1].str() + "\""), std::string::npos) << limited;

  gateway_.reset();
  StartGateway("combined", kStranger);
  EXPECT_EQ(Received(Curl(chosen + Url("/_test/headers"))), "chosen");
  const std::string refused = Curl("-i " + chosen + Url("/none"));
  EXPECT_NE(refused.find("x-request-id: chosen\r\n"), std::string::npos) << refused;
  EXPECT_NE(refused.find("\"request_id\":\"chosen\""), std::string::npos) << refused;
}

// An HTTP/2 upstream (upstream_peer.py's headers: the request's fields as
// its body) sees the ID, from HTTP/1.1 and HTTP/2 clients.
TEST_F(RequestIdTest, Http2UpstreamsSeeTheId) {
  PortPeer peer({kPython, kScripts + "/upstream_peer.py", "headers", "{STATS}"});
  gateway_ = std::make_unique<TestGateway>(
      Config(log_, "combined", kStranger) + "[[upstreams]]\nname = \"h2\"\nservers = [\"127.0.0.1:" +
          std::to_string(peer.port()) + "\"]\nprotocol = \"h2c\"\n[[routes]]\npath_prefix = "
          "\"/h2\"\nupstream = \"h2\"\n",
      echo_->port());
  EXPECT_EQ(Received(Curl("-H 'X-Request-Id: via-h2' " + Url("/h2/x"))), "via-h2");
  EXPECT_EQ(Received(Get(kStranger, "/h2/x", "X-Request-Id: via-h1\r\n")), "via-h1");
  const std::string made = Received(Get(kProxy, "/h2/x", "X-Request-Id: chosen\r\n"));
  EXPECT_TRUE(IsNewId(made)) << made;
}

}  // namespace
}  // namespace tollgate::testing
