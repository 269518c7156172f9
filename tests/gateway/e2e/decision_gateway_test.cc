// The decision service (docs/decision-service.md) with real peers: a gateway with a
// [decision] listener, asked by
// - a real Envoy RLS client (rls_client.py: Debian's python3-grpcio under
//   /usr/bin/python3, with the stubs that protoc and grpc_python_plugin
//   generate from the project's own gateway/decision/proto at build time,
//   TOLLGATE_RLS_STUBS) calling ShouldRateLimit;
// - curl asking the check endpoint;
// - a real nginx (Debian's nginx-light) with auth_request in front of the
//   echo upstream, asking the check endpoint for every request.
// The gateway's clock is a ManualClock: windows and resets are exact. The
// share case runs three gateways in this process on a real redis-server
// (tests/support/redis_server.h), which it kills; the reload case reloads
// between two calls of one rls_client.py channel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "redis_server.h"
#include "rules/config.h"
#include "tests/gateway/e2e/decision_fixture.h"
#include "tests/gateway/test_support.h"
#include "tests/support/net.h"
#include "tests/support/prometheus.h"

namespace tollgate::testing {
namespace {

// What `curl -si` printed, in a form that HTTP/1.1 and HTTP/2 share:
// "status N", the header fields with lowercase names (HTTP/2 sends them so)
// sorted, but those that only one protocol has (Connection, Keep-Alive),
// then an empty line and the body; each answer's own X-Request-Id, in its
// field and its body, is written "<id>".
std::string Normalized(const std::string& curl_out) {
  std::istringstream in(curl_out);
  std::string line;
  std::getline(in, line);
  const std::size_t space = line.find(' ');
  std::string out = "status " + line.substr(space + 1, 3) + "\n";
  std::vector<std::string> fields;
  std::string id;  // each answer's own X-Request-Id, written as <id>
  while (std::getline(in, line) && line != "\r" && !line.empty()) {
    if (line.back() == '\r') line.pop_back();
    const std::size_t colon = line.find(':');
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (name == "connection" || name == "keep-alive") continue;
    if (name == "x-request-id") {
      id = line.substr(colon + 2);
      line.replace(colon + 2, std::string::npos, "<id>");
    }
    fields.push_back(name + line.substr(colon));
  }
  std::sort(fields.begin(), fields.end());
  for (const std::string& f : fields) out += f + "\n";
  std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (const std::size_t at = id.empty() ? std::string::npos : body.find(id);
      at != std::string::npos) {
    body.replace(at, id.size(), "<id>");
  }
  return out + "\n" + body;
}

// --- Envoy RLS ---

// OK for exactly `limit` calls of one descriptor, then OVER_LIMIT with
// the per-descriptor status, the RateLimit and Retry-After fields and the
// 429 body; the entries' order does not matter; another descriptor value
// is another key. Rules without domain/descriptor are not applied to RLS
// calls.
TEST_F(DecisionService, RlsOkThenOverLimitAfterExactlyTheLimit) {
  Start(kRlsRules);
  // The ManualClock is at 1,000,000 ms: the 1-minute window began at
  // 960,000 ms and ends in 20 s.
  const std::string out = Rls({RlsCall({kLogin}), RlsCall({kLoginReordered}), RlsCall({kLogin}),
                               RlsCall({kLoginReordered}), RlsCall({kLoginOther})});
  EXPECT_TRUE(Contains(out,
                       "0 code=OK overall=OK\n"
                       "0 status 0 code=OK limit=login 3/MINUTE remaining=2 reset_ms=20000\n"
                       "0 header RateLimit-Policy: \"login\";q=3;w=60\n"
                       "0 header RateLimit: \"login\";r=2;t=20\n"));
  EXPECT_TRUE(Contains(out, "1 status 0 code=OK limit=login 3/MINUTE remaining=1 reset_ms=20000\n"));
  EXPECT_TRUE(Contains(out, "2 status 0 code=OK limit=login 3/MINUTE remaining=0 reset_ms=20000\n"));
  EXPECT_TRUE(Contains(out,
                       "3 code=OK overall=OVER_LIMIT\n"
                       "3 status 0 code=OVER_LIMIT limit=login 3/MINUTE remaining=0 "
                       "reset_ms=20000\n"
                       "3 header RateLimit-Policy: \"login\";q=3;w=60\n"
                       "3 header RateLimit: \"login\";r=0;t=20\n"
                       "3 header X-RateLimit-Limit: 3\n"
                       "3 header X-RateLimit-Remaining: 0\n"
                       "3 header X-RateLimit-Reset: 20\n"
                       "3 header Retry-After: 20\n"
                       "3 body {\"error\":\"rate_limited\",\"rule\":\"login\","
                       "\"retry_after_ms\":20000}\n"));
  EXPECT_TRUE(Contains(out, "4 status 0 code=OK limit=login 3/MINUTE remaining=2 reset_ms=20000\n"));
  const std::string metrics = Metrics();
  EXPECT_TRUE(Contains(metrics, "tollgate_decision_requests_total{protocol=\"rls\"} 5\n"));
  EXPECT_TRUE(Contains(metrics, "tollgate_decision_requests_total{protocol=\"http\"} 0\n"));
  EXPECT_TRUE(Contains(metrics,
                       "tollgate_ratelimit_decisions_total{rule=\"login\",decision=\"limited\"} 1\n"));
  EXPECT_TRUE(Contains(metrics,
                       "tollgate_ratelimit_decisions_total{rule=\"login\",decision=\"allowed\"} 4\n"));
  EXPECT_TRUE(Contains(
      metrics, "tollgate_ratelimit_decisions_total{rule=\"http-only\",decision=\"allowed\"} 0\n"));
  // The window ends: the descriptor passes again.
  gateway_->clock().Advance(20'000);
  EXPECT_TRUE(Contains(Rls({RlsCall({kLogin})}),
                       "0 status 0 code=OK limit=login 3/MINUTE remaining=2 reset_ms=60000\n"));
}

// Several descriptors: each decided by its own rules; one over its limit
// makes the whole answer OVER_LIMIT, the others keep their own codes, and
// one that no rule matches is OK without a limit.
TEST_F(DecisionService, RlsSeveralDescriptorsOneOver) {
  Start(kRlsRules);
  const std::string tenant = R"([["tenant","acme"]])";
  const std::string unmatched = R"([["path","/login"]])";
  const std::string call = RlsCall({kLogin, tenant, unmatched});
  const std::string out = Rls({call, call, call, call});
  EXPECT_TRUE(Contains(out,
                       "2 code=OK overall=OK\n"
                       "2 status 0 code=OK limit=login 3/MINUTE remaining=0 reset_ms=20000\n"
                       "2 status 1 code=OK limit=tenant 10/SECOND remaining=7 reset_ms=300\n"
                       "2 status 2 code=OK\n"));
  EXPECT_TRUE(Contains(out,
                       "3 code=OK overall=OVER_LIMIT\n"
                       "3 status 0 code=OVER_LIMIT limit=login 3/MINUTE remaining=0 "
                       "reset_ms=20000\n"
                       "3 status 1 code=OK limit=tenant 10/SECOND remaining=6 reset_ms=400\n"
                       "3 status 2 code=OK\n"));
}

// hits_addend is the cost: the request's for every descriptor, a
// descriptor's own over it.
TEST_F(DecisionService, RlsHitsAddendIsTheCost) {
  Start(kRlsRules);
  const std::string tenant = R"([["tenant","acme"]])";
  const std::string tenant_own = R"({"entries":[["tenant","acme"]],"hits_addend":5})";
  const std::string out =
      Rls({RlsCall({tenant}, ",\"hits_addend\":4"), RlsCall({tenant_own}, ",\"hits_addend\":1"),
           RlsCall({tenant}, ",\"hits_addend\":2"), RlsCall({tenant})});
  EXPECT_TRUE(Contains(out, "0 status 0 code=OK limit=tenant 10/SECOND remaining=6 "));
  EXPECT_TRUE(Contains(out, "1 status 0 code=OK limit=tenant 10/SECOND remaining=1 "));
  // 2 > the 1 left: refused, and nothing taken.
  EXPECT_TRUE(Contains(out, "2 code=OK overall=OVER_LIMIT\n2 status 0 code=OVER_LIMIT "));
  EXPECT_TRUE(Contains(out, "3 status 0 code=OK limit=tenant 10/SECOND remaining=0 "));
}

// One rule of every algorithm, 10 a day (leaky_bucket: 5, policing), so
// that cost x window is far beyond int64 for a huge hits_addend.
constexpr const char* kEveryAlgorithmADay = R"(
[[rules]]
name = "token_bucket"
match = { domain = "edge", descriptor = { alg = "token_bucket" } }
key = "descriptor"
algorithm = "token_bucket"
limit = 10
window = "1d"
[[rules]]
name = "leaky_bucket"
match = { domain = "edge", descriptor = { alg = "leaky_bucket" } }
key = "descriptor"
algorithm = "leaky_bucket"
limit = 10
window = "1d"
burst = 4
nodelay = true
[[rules]]
name = "fixed_window"
match = { domain = "edge", descriptor = { alg = "fixed_window" } }
key = "descriptor"
algorithm = "fixed_window"
limit = 10
window = "1d"
[[rules]]
name = "sliding_log"
match = { domain = "edge", descriptor = { alg = "sliding_log" } }
key = "descriptor"
algorithm = "sliding_log"
limit = 10
window = "1d"
[[rules]]
name = "sub_window"
match = { domain = "edge", descriptor = { alg = "sub_window" } }
key = "descriptor"
algorithm = "sub_window"
limit = 10
window = "1d"
[[rules]]
name = "two_bucket"
match = { domain = "edge", descriptor = { alg = "two_bucket" } }
key = "descriptor"
algorithm = "two_bucket"
limit = 10
window = "1d"
)";

// A hits_addend above a limit's capacity is OVER_LIMIT and leaves the key
// as it was, on every algorithm and both stores: the request's largest
// hits_addend, then a descriptor's whose cost x window overflowed int64,
// then unit calls, of which exactly the capacity pass.
TEST_F(DecisionService, RlsHitsAddendAboveTheCapacityIsOverLimitAndTakesNothing) {
  RedisServer redis;
  for (const std::string& store :
       {std::string(), RedisStoreSection("url = \"" + redis.url() + "\"", "deny", "1s")}) {
    gateway_.reset();
    Start(std::string(kEveryAlgorithmADay) + store);
    for (const std::string alg : {"token_bucket", "leaky_bucket", "fixed_window", "sliding_log",
                                  "sub_window", "two_bucket"}) {
      const std::string entry = "[[\"alg\",\"" + alg + "\"]]";
      const std::string huge = "{\"entries\":" + entry + ",\"hits_addend\":106751991168}";
      std::vector<std::string> calls = {RlsCall({entry}, ",\"hits_addend\":4294967295"),
                                        RlsCall({huge})};
      for (int i = 0; i < 12; ++i) calls.push_back(RlsCall({entry}));
      const std::string out = Rls(calls);
      SCOPED_TRACE(alg + (store.empty() ? " on the local store" : " on Redis"));
      EXPECT_TRUE(Contains(out, "0 code=OK overall=OVER_LIMIT\n"));
      EXPECT_TRUE(Contains(out, "1 code=OK overall=OVER_LIMIT\n"));
      std::size_t passed = 0;
      for (std::size_t at = 0; (at = out.find("overall=OK\n", at)) != std::string::npos; ++at) {
        ++passed;
      }
      EXPECT_EQ(passed, alg == "leaky_bucket" ? 5U : 10U) << out;
    }
  }
}

// A decision service alone, as envoyproxy/ratelimit is deployed: no
// listener, upstream or route, and both RLS and /check are served.
TEST_F(DecisionService, ServedAloneWithoutListenersOrRoutes) {
  gateway_ = std::make_unique<TestGateway>(std::string(R"(
[server]
threads = 1
[admin]
address = "127.0.0.1:0"
[log]
access = "off"
[decision]
address = "127.0.0.1:0"
)") + kRlsRules,
                                           0);
  EXPECT_TRUE(gateway_->server().listener_ports().empty());
  EXPECT_TRUE(
      Contains(Rls({RlsCall({kLogin})}), "0 status 0 code=OK limit=login 3/MINUTE remaining=2 "));
  // Checks are decided by the rules that name no route.
  const std::vector<std::string> original = {"X-Original-URI: /api/items"};
  EXPECT_TRUE(Contains(Check(original), "HTTP/1.1 200"));
  EXPECT_TRUE(Contains(Check(original), "HTTP/1.1 429"));
}

// Fields this copy of Envoy's .proto does not know are skipped.
TEST_F(DecisionService, RlsUnknownFieldsAreSkipped) {
  Start(kRlsRules);
  EXPECT_TRUE(Contains(Rls({RlsCall({kLogin}, ",\"unknown\":true")}),
                       "0 status 0 code=OK limit=login 3/MINUTE remaining=2 "));
}

// A malformed message is INVALID_ARGUMENT naming the field; another method
// of the service, or of another, UNIMPLEMENTED. None takes from a limit.
TEST_F(DecisionService, RlsMalformedMessagesAndOtherMethods) {
  Start(kRlsRules);
  const std::string out = Rls({
      R"({"raw":"0a10ab"})",
      R"({"descriptors":[{"entries":[["path","/login"]]}]})",
      RlsCall({}),
      RlsCall({"[]"}),
      RlsCall({kLogin, R"([["","x"]])"}),
      R"({"method":"/envoy.service.ratelimit.v3.RateLimitService/Other","raw":""})",
      R"({"method":"/pkg.Service/Method","raw":""})",
      RlsCall({kLogin}),
  });
  EXPECT_TRUE(Contains(out, "0 code=INVALID_ARGUMENT details=the message is not a valid "
                            "RateLimitRequest\n"));
  EXPECT_TRUE(Contains(out, "1 code=INVALID_ARGUMENT details=domain: must not be empty\n"));
  EXPECT_TRUE(Contains(out, "2 code=INVALID_ARGUMENT details=descriptors: at least one is "
                            "required\n"));
  EXPECT_TRUE(Contains(out, "3 code=INVALID_ARGUMENT details=descriptors[0].entries: at least "
                            "one is required\n"));
  EXPECT_TRUE(Contains(out, "4 code=INVALID_ARGUMENT details=descriptors[1].entries[0].key: must "
                            "not be empty\n"));
  EXPECT_TRUE(Contains(out, "5 code=UNIMPLEMENTED details=the decision listener serves "
                            "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit only\n"));
  EXPECT_TRUE(Contains(out, "6 code=UNIMPLEMENTED "));
  // The first valid call takes the first of the limit.
  EXPECT_TRUE(Contains(out, "7 status 0 code=OK limit=login 3/MINUTE remaining=2 "));
}

// A client blocked through the admin API is OVER_LIMIT by no rule, with
// the block's Retry-After and body for Envoy to pass on.
TEST_F(DecisionService, RlsBlockedClient) {
  StartWithAdminToken(kRlsRules);
  ASSERT_EQ(Admin("PUT", "/api/v1/blocks", R"({"ip":"127.0.0.1","ttl":"10m"})").result_int(), 200);
  const std::string out = Rls({RlsCall({kLogin})});
  EXPECT_TRUE(Contains(out,
                       "0 code=OK overall=OVER_LIMIT\n"
                       "0 status 0 code=OVER_LIMIT\n"
                       "0 header Retry-After: 600\n"
                       "0 body {\"error\":\"blocked\",\"message\":\"requests of this client are "
                       "blocked\",\"status\":403}\n"));
}

// The admin API names a descriptor-keyed rule's key by its entries
// ("key=value,key=value", in any order when the rule matches on them), as
// its GET shows them: inspected and reset are the key RLS calls count.
TEST_F(DecisionService, AdminKeysNameADescriptorsKey) {
  StartWithAdminToken(kRlsRules);
  Rls({RlsCall({kLogin}), RlsCall({kLogin})});
  const std::string key = "/api/v1/keys?rule=login&descriptor=" +
                          std::string("path%3D%2Flogin%2Cremote_address%3D10.0.0.1");
  const Response got = Admin("GET", key);
  ASSERT_EQ(got.result_int(), 200) << got.body();
  EXPECT_TRUE(Contains(got.body(), "\"key\":\"descriptor=path=/login,remote_address=10.0.0.1\""));
  EXPECT_TRUE(Contains(got.body(), "\"remaining\":1,"));
  ASSERT_EQ(Admin("DELETE", key).result_int(), 200);
  EXPECT_TRUE(Contains(Rls({RlsCall({kLogin})}),
                       "0 status 0 code=OK limit=login 3/MINUTE remaining=2 "));
  const Response bad = Admin("GET", "/api/v1/keys?rule=login&descriptor=path");
  EXPECT_EQ(bad.result_int(), 400);
  EXPECT_TRUE(Contains(bad.body(), "\"field\":\"descriptor\""));
}

// Redis down: on_error = "deny" ends the call UNAVAILABLE (so Envoy's
// failure_mode_deny decides), "allow" answers OK, "local" decides with the
// gateway's own store.
TEST_F(DecisionService, RlsStoreDown) {
  const std::string redis = "url = \"redis://127.0.0.1:" + std::to_string(UnusedPort()) + "/0\"";
  Start(std::string(kRlsRules) + RedisStoreSection(redis, "deny", "50ms"));
  EXPECT_TRUE(Contains(Rls({RlsCall({kLogin})}),
                       "0 code=UNAVAILABLE details=the rate-limit store is unavailable\n"));
  gateway_.reset();
  Start(std::string(kRlsRules) + RedisStoreSection(redis, "allow", "50ms"));
  const std::string out = Rls({RlsCall({kLogin}), RlsCall({kLogin}), RlsCall({kLogin}),
                               RlsCall({kLogin})});
  EXPECT_TRUE(Contains(out, "3 code=OK overall=OK\n3 status 0 code=OK"));
  EXPECT_TRUE(Lacks(out, "OVER_LIMIT"));
  // "local": this gateway's own store decides meanwhile, limit and all.
  gateway_.reset();
  Start(std::string(kRlsRules) + RedisStoreSection(redis, "local", "50ms"));
  const std::string local = Rls({RlsCall({kLogin}), RlsCall({kLogin}), RlsCall({kLogin}),
                                 RlsCall({kLogin})});
  EXPECT_TRUE(Contains(local, "2 code=OK overall=OK\n"));
  EXPECT_TRUE(Contains(local, "3 code=OK overall=OVER_LIMIT\n3 status 0 code=OVER_LIMIT "));
}

// Redis down under on_error = "share": three gateways on one real Redis
// count each other (the membership heartbeat), share one limit while
// Redis answers, and with Redis killed each decides a third of the limit
// on its own, so the fleet's RLS answers stay within the limit (60 an
// hour: 20 OK per gateway, then OVER_LIMIT), where "local" would allow
// 60 on each.
TEST_F(DecisionService, RlsUnderShareWithRedisKilled) {
  RedisServer redis;
  const std::string rules = R"(
[[rules]]
name = "login"
match = { domain = "edge", descriptor = { remote_address = "*", path = "/login" } }
key = "descriptor"
algorithm = "fixed_window"
limit = 60
window = "1h"
)";
  echo_ = StartEcho();
  std::vector<std::unique_ptr<TestGateway>> fleet;
  for (int g = 0; g < 3; ++g) {
    fleet.push_back(std::make_unique<TestGateway>(
        BasicConfig("[decision]\naddress = \"127.0.0.1:0\"\n" + rules +
                    RedisStoreSection("url = \"" + redis.url() + "\"", "share", "100ms")),
        echo_->port()));
  }
  const auto admin = [&](int g, const std::string& target) {
    Client client(fleet[g]->admin_port());
    return client.Get(target).body();
  };
  // Every gateway counts the fleet (a heartbeat a second, on real time).
  for (int g = 0; g < 3; ++g) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (admin(g, "/readyz").find("\"gateways\":3") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(Contains(admin(g, "/readyz"), "\"gateways\":3"));
  }
  // While Redis answers the fleet shares one count.
  for (int g = 0; g < 3; ++g) {
    EXPECT_TRUE(Contains(Shell(RlsCommand(fleet[g]->server().decision_port(), {RlsCall({kLogin})})),
                         "remaining=" + std::to_string(59 - g) + " "))
        << g;
  }
  redis.Kill();
  int ok = 0;
  for (int g = 0; g < 3; ++g) {
    const std::vector<std::string> calls(25, RlsCall({kLogin}));
    const std::string out = Shell(RlsCommand(fleet[g]->server().decision_port(), calls));
    int gateway_ok = 0;
    for (std::size_t at = out.find("overall=OK\n"); at != std::string::npos;
         at = out.find("overall=OK\n", at + 1)) {
      ++gateway_ok;
    }
    // A third of 60 each, then OVER_LIMIT; nothing else (no UNAVAILABLE).
    // current_limit (and RateLimit-Policy) keep the rule's limit;
    // limit_remaining counts down this gateway's share, as the RateLimit
    // fields of a proxied request do.
    EXPECT_EQ(gateway_ok, 20) << out;
    EXPECT_TRUE(Contains(out, "0 status 0 code=OK limit=login 60/HOUR remaining=19 "));
    EXPECT_TRUE(Contains(out, "20 code=OK overall=OVER_LIMIT\n20 status 0 code=OVER_LIMIT "));
    EXPECT_TRUE(Contains(out, "24 code=OK overall=OVER_LIMIT\n"));
    EXPECT_TRUE(Lacks(out, "UNAVAILABLE"));
    ok += gateway_ok;
    Client metrics(fleet[g]->admin_port());
    EXPECT_GT(IntSample(metrics.Get("/metrics").body(),
                       "tollgate_store_fallback_total{policy=\"share\"}"),
              0);
  }
  EXPECT_EQ(ok, 60);
}

// A reload applies to the RLS calls after it, on the connection that is
// already open (one rls_client.py channel; it waits for the test between
// calls): a changed limit is in force for the next call (the changed rule
// starts afresh, as for HTTP rules); a configuration that does not load or
// that the gateway refuses leaves the running rules as they were; a rule
// taken out no longer limits.
TEST_F(DecisionService, RlsAcrossReloads) {
  Start(kRlsRules);
  const TempDir dir;
  const auto text = [&](const std::string& rules, const std::string& more = "") {
    return WithEchoPort(BasicConfig("[decision]\naddress = \"127.0.0.1:0\"\n" + rules + more),
                        echo_->port());
  };
  std::string with_five = kRlsRules;
  with_five.replace(with_five.find("limit = 3\n"), 10, "limit = 5\n");
  std::string bad = kRlsRules;  // an RLS rule may not key on the peer
  bad.replace(bad.find("key = \"descriptor\""), 18, "key = \"ip\"");
  std::string with_one = kRlsRules;
  with_one.replace(with_one.find("limit = 3\n"), 10, "limit = 1\n");
  std::vector<std::string> errors;
  const auto reload = [&](const std::string& toml) {
    rules::LoadResult loaded = rules::LoadConfigText(toml, "reload.toml");
    if (!loaded.config) {
      for (const rules::ConfigError& e : loaded.errors) errors.push_back(e.ToString());
      return false;
    }
    std::string error;
    const bool done = gateway_->server().Reload(
        std::make_shared<const rules::Config>(std::move(*loaded.config)), error);
    if (!done) errors.push_back(error);
    return done;
  };
  const std::string login = RlsCall({kLogin});
  const auto wait = [&](int n) {
    return "{\"wait_for\":\"" + dir.path() + "/go" + std::to_string(n) + "\"}";
  };
  const std::vector<std::string> calls = {login,   login, wait(2), login,   wait(4),
                                          login,   wait(6), login, wait(8), login};
  std::vector<bool> reloaded;
  const std::string out =
      ShellWhile(RlsCommand(decision_port(), calls), [&](const std::string& line) {
        if (line.find(" waiting") == std::string::npos) return;
        const int i = std::stoi(line);
        if (i == 2) reloaded.push_back(reload(text(with_five)));
        if (i == 4) reloaded.push_back(reload(text(bad)));
        if (i == 6) {
          reloaded.push_back(reload(text(with_one, "[store]\nmax_keys = 5\n")));
        }
        if (i == 8) {
          std::string rest = kRlsRules;
          rest.erase(0, rest.find("[[rules]]\nname = \"tenant\""));
          reloaded.push_back(reload(text(rest)));
        }
        dir.Write("go" + std::to_string(i), "");
      });
  EXPECT_EQ(reloaded, (std::vector<bool>{true, false, false, true}));
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_TRUE(Contains(errors[0], "ip")) << errors[0];
  EXPECT_TRUE(Contains(errors[1], "[store] changed")) << errors[1];
  EXPECT_TRUE(Contains(out, "1 status 0 code=OK limit=login 3/MINUTE remaining=1 "));
  // The good reload: 5 a minute, counted afresh.
  EXPECT_TRUE(Contains(out, "3 status 0 code=OK limit=login 5/MINUTE remaining=4 "));
  // Neither the file that does not load nor the refused one changed it.
  EXPECT_TRUE(Contains(out, "5 status 0 code=OK limit=login 5/MINUTE remaining=3 "));
  EXPECT_TRUE(Contains(out, "7 status 0 code=OK limit=login 5/MINUTE remaining=2 "));
  // The rule taken out: the descriptor matches nothing.
  EXPECT_TRUE(Contains(out, "9 code=OK overall=OK\n9 status 0 code=OK\n"));
  const std::string metrics = Metrics();
  EXPECT_TRUE(Contains(metrics, "tollgate_config_reloads_total{result=\"success\"} 2\n"));
  // The refused one (the file that does not load never reaches the server).
  EXPECT_TRUE(Contains(metrics, "tollgate_config_reloads_total{result=\"failure\"} 1\n"));
}

// [decision] tls: the same port serves gRPC over TLS (ALPN h2) and the
// check endpoint over HTTPS.
TEST_F(DecisionService, TlsServesBothProtocols) {
  const TempDir dir;
  const auto [cert, key] = MakeCertificate(dir, "localhost");
  Start(kRlsRules, "tls = { cert = \"" + cert + "\", key = \"" + key + "\" }\n");
  EXPECT_TRUE(Contains(Rls({RlsCall({kLogin}), RlsCall({kLogin})}, cert),
                       "1 status 0 code=OK limit=login 3/MINUTE remaining=1 "));
  const std::string check =
      Shell("curl -si --http1.1 --cacert " + cert + " -H 'X-Original-URI: /' https://localhost:" +
            std::to_string(decision_port()) + "/check");
  EXPECT_TRUE(Contains(check, "HTTP/1.1 200 OK\r\n"));
  const std::string metrics = Metrics();
  EXPECT_TRUE(Contains(metrics, "tollgate_decision_requests_total{protocol=\"http\"} 1\n"));
  EXPECT_TRUE(Contains(metrics, "tollgate_decision_requests_total{protocol=\"rls\"} 2\n"));
}

// --- the check endpoint ---

constexpr const char* kPerIp = R"(
[identity]
trusted_proxies = ["127.0.0.1/32"]
[[rules]]
name = "per-ip"
match = { path_prefix = "/api" }
key = "ip"
algorithm = "fixed_window"
limit = 2
window = "1m"
[[rules]]
name = "rls-only"
match = { domain = "edge" }
key = "global"
algorithm = "fixed_window"
limit = 1
window = "1h"
)";

// curl describes the original request: 200 with the RateLimit fields for
// `limit` checks, then 429 with Retry-After, the fields and the proxy's
// body; the client's address comes from X-Forwarded-For (or X-Real-IP)
// because the peer (127.0.0.1) is a trusted proxy, and from the peer when
// it is not (127.0.0.2); a path no rule matches is allowed without fields.
TEST_F(DecisionService, CheckWithCurl) {
  Start(kPerIp);
  const std::vector<std::string> a = {"X-Original-URI: /api/items?page=2",
                                      "X-Original-Method: POST", "X-Forwarded-For: 192.0.2.1"};
  const std::string first = Check(a);
  EXPECT_TRUE(Contains(first, "HTTP/1.1 200 OK\r\n"));
  EXPECT_TRUE(Contains(first, "RateLimit-Policy: \"per-ip\";q=2;w=60\r\n"));
  EXPECT_TRUE(Contains(first, "RateLimit: \"per-ip\";r=1;t=20\r\n"));
  EXPECT_TRUE(Contains(Check(a), "RateLimit: \"per-ip\";r=0;t=20\r\n"));
  const std::string limited = Check(a);
  EXPECT_TRUE(Contains(limited, "HTTP/1.1 429 Too Many Requests\r\n"));
  EXPECT_TRUE(Contains(limited, "Retry-After: 20\r\n"));
  EXPECT_TRUE(Contains(limited, "RateLimit: \"per-ip\";r=0;t=20\r\n"));
  EXPECT_TRUE(Contains(limited,
                       "\r\n\r\n{\"error\":\"rate_limited\",\"rule\":\"per-ip\","
                       "\"retry_after_ms\":20000,\"request_id\":\""));
  // Another client of the trusted proxy, by X-Real-IP.
  EXPECT_TRUE(Contains(Check({"X-Original-URI: /api/items", "X-Real-IP: 192.0.2.2"}),
                       "RateLimit: \"per-ip\";r=1;t=20\r\n"));
  // An untrusted peer's X-Forwarded-For is not believed: its own address is
  // the key, whatever it claims.
  EXPECT_TRUE(Contains(Check({"X-Original-URI: /api", "X-Forwarded-For: 192.0.2.3"},
                             "--interface 127.0.0.2"),
                       "RateLimit: \"per-ip\";r=1;t=20\r\n"));
  EXPECT_TRUE(Contains(Check({"X-Original-URI: /api", "X-Forwarded-For: 192.0.2.4"},
                             "--interface 127.0.0.2"),
                       "RateLimit: \"per-ip\";r=0;t=20\r\n"));
  // No rule: 200 without fields.
  const std::string free = Check({"X-Original-URI: /about", "X-Forwarded-For: 192.0.2.1"});
  EXPECT_TRUE(Contains(free, "HTTP/1.1 200 OK\r\n"));
  EXPECT_TRUE(Lacks(free, "RateLimit"));
  // The check request itself is wrong: 400, naming what is missing.
  const std::string bad = Check({});
  EXPECT_TRUE(Contains(bad, "HTTP/1.1 400 Bad Request\r\n"));
  EXPECT_TRUE(Contains(bad, "X-Original-URI"));
  EXPECT_TRUE(Contains(Check({"X-Original-URI: /api"}, "", "/other"), "HTTP/1.1 404 "));
  const std::string metrics = Metrics();
  EXPECT_TRUE(Contains(metrics, "tollgate_decision_requests_total{protocol=\"http\"} 9\n"));
  EXPECT_TRUE(Contains(metrics, "tollgate_decision_requests_total{protocol=\"rls\"} 0\n"));
  EXPECT_TRUE(Contains(
      metrics, "tollgate_ratelimit_decisions_total{rule=\"per-ip\",decision=\"limited\"} 1\n"));
  EXPECT_TRUE(Contains(
      metrics, "tollgate_ratelimit_decisions_total{rule=\"rls-only\",decision=\"allowed\"} 0\n"));
}

// What Traefik's forwardAuth sends (Traefik is not a Debian package, so
// curl sends its request: a GET to the configured address with tollgate's
// own Host, the client's fields, and X-Forwarded-Method, -Proto, -Host,
// -Uri and -For, as pkg/middlewares/auth/forward.go writes them): the
// check describes the original from X-Forwarded-*, host and method
// included, and Traefik (the trusted peer) gives the client's address.
// Traefik returns a refusal to its client as it is, so no deny_status.
TEST_F(DecisionService, CheckWithTraefikForwardAuthFields) {
  Start(std::string(kPerIp) + R"(
[[rules]]
name = "shop-deletes"
match = { host = "shop.example", methods = ["DELETE"], path_prefix = "/api" }
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1d"
)");
  const auto traefik = [&](const std::string& method, const std::string& host,
                           const std::string& client) {
    return Check({"User-Agent: Mozilla/5.0", "Accept: */*", "X-Forwarded-For: " + client,
                  "X-Forwarded-Method: " + method, "X-Forwarded-Proto: https",
                  "X-Forwarded-Host: " + host, "X-Forwarded-Uri: /api/items/3?force=1"});
  };
  const std::string first = traefik("DELETE", "shop.example", "192.0.2.1");
  EXPECT_TRUE(Contains(first, "HTTP/1.1 200 OK\r\n"));
  EXPECT_TRUE(Contains(first, "RateLimit-Policy: \"shop-deletes\";q=1;w=86400\r\n"));
  const std::string limited = traefik("DELETE", "shop.example", "192.0.2.1");
  EXPECT_TRUE(Contains(limited, "HTTP/1.1 429 Too Many Requests\r\n"));
  EXPECT_TRUE(Contains(limited, "Retry-After: "));
  EXPECT_TRUE(Contains(limited, "{\"error\":\"rate_limited\",\"rule\":\"shop-deletes\""));
  // Another client of Traefik: its own key.
  EXPECT_TRUE(Contains(traefik("DELETE", "shop.example", "192.0.2.2"), "HTTP/1.1 200 OK\r\n"));
  // Another host or method (new clients: per-ip, 2 a minute, also counts
  // them): shop-deletes does not match, per-ip does (/api).
  const std::string other_host = traefik("DELETE", "other.example", "192.0.2.3");
  EXPECT_TRUE(Contains(other_host, "HTTP/1.1 200 OK\r\n"));
  EXPECT_TRUE(Contains(other_host, "RateLimit: \"per-ip\";r=1;t=20\r\n"));
  EXPECT_TRUE(Lacks(other_host, "shop-deletes"));
  const std::string get = traefik("GET", "shop.example", "192.0.2.4");
  EXPECT_TRUE(Contains(get, "HTTP/1.1 200 OK\r\n"));
  EXPECT_TRUE(Lacks(get, "shop-deletes"));
  // The same fields over HTTP/2 (h2c): the second client's second DELETE.
  const std::string http2 =
      Check({"X-Forwarded-For: 192.0.2.2", "X-Forwarded-Method: DELETE",
             "X-Forwarded-Host: shop.example", "X-Forwarded-Uri: /api/x"},
            "--http2-prior-knowledge");
  EXPECT_TRUE(Contains(http2, "HTTP/2 429 \r\n"));
  EXPECT_TRUE(Contains(http2, "\"rule\":\"shop-deletes\""));
}

// deny_status replaces the refusal's status (nginx's auth_request takes
// only 401 and 403 as refusals), with the same fields; a bad check keeps
// its 400.
TEST_F(DecisionService, CheckDenyStatus) {
  Start(kPerIp, "deny_status = 403\n");
  const std::vector<std::string> a = {"X-Original-URI: /api", "X-Real-IP: 192.0.2.1"};
  Check(a);
  Check(a);
  const std::string limited = Check(a);
  EXPECT_TRUE(Contains(limited, "HTTP/1.1 403 Forbidden\r\n"));
  EXPECT_TRUE(Contains(limited, "Retry-After: 20\r\n"));
  EXPECT_TRUE(Contains(limited, "RateLimit: \"per-ip\";r=0;t=20\r\n"));
  EXPECT_TRUE(Contains(Check({}), "HTTP/1.1 400 Bad Request\r\n"));
}

// One check at a time per 200 ms, the others held (up to 5 s).
constexpr const char* kQueue = R"(
[[rules]]
name = "queue"
key = "global"
algorithm = "fixed_window"
limit = 1
window = "200ms"
action = "delay"
max_delay = "5s"
)";

// A delay rule holds the check's answer as it would hold the request:
// checks beyond the limit are answered 200 once their turn comes, not
// refused. Real timers (a steady clock); the assertions are about
// outcomes, not time.
TEST_F(DecisionService, CheckHoldsADelayedRequest) {
  Start(kQueue, "", TestClock::kSteady);
  const std::string url = "http://127.0.0.1:" + std::to_string(decision_port()) + "/check";
  const std::string out = Shell("curl -s -o /dev/null -w '%{http_code}\\n' -H 'X-Original-URI: /' " +
                                url + " " + url + " " + url);
  EXPECT_EQ(out, "200\n200\n200\n");
  EXPECT_TRUE(Contains(
      Metrics(), "tollgate_ratelimit_decisions_total{rule=\"queue\",decision=\"delayed\"} 2\n"));
}

// --- the check endpoint over HTTP/2 ---

// The same checks over HTTP/1.1 and over HTTP/2 with prior knowledge (h2c,
// curl --http2-prior-knowledge), each protocol with its own client address
// (its own key): the same statuses, fields and bodies, whether allowed,
// limited (deny_status applied), without a rule, malformed, or not /check.
// Counted as protocol "http" both ways.
TEST_F(DecisionService, CheckOverHttp2AnswersAsOverHttp1) {
  Start(kPerIp, "deny_status = 403\n");
  const auto checks = [&](const std::string& client, const std::string& options) {
    const std::vector<std::string> a = {"X-Original-URI: /api/items?page=2",
                                        "X-Original-Method: POST", "X-Forwarded-For: " + client};
    std::vector<std::string> out;
    for (int i = 0; i < 3; ++i) out.push_back(Check(a, options));
    out.push_back(Check({"X-Original-URI: /about", "X-Forwarded-For: " + client}, options));
    out.push_back(Check({}, options));
    out.push_back(Check({"X-Original-URI: /api"}, options, "/other"));
    return out;
  };
  const std::vector<std::string> http1 = checks("192.0.2.1", "--http1.1");
  const std::vector<std::string> http2 = checks("192.0.2.2", "--http2-prior-knowledge");
  ASSERT_EQ(http1.size(), http2.size());
  for (std::size_t i = 0; i < http1.size(); ++i) {
    EXPECT_TRUE(Contains(http1[i], "HTTP/1.1 ")) << i;
    EXPECT_TRUE(Contains(http2[i], "HTTP/2 ")) << i;
    EXPECT_EQ(Normalized(http1[i]), Normalized(http2[i])) << i;
  }
  // What both said.
  EXPECT_TRUE(Contains(Normalized(http2[0]), "status 200\n"));
  EXPECT_TRUE(Contains(Normalized(http2[0]), "ratelimit: \"per-ip\";r=1;t=20\n"));
  EXPECT_TRUE(Contains(Normalized(http2[1]), "ratelimit: \"per-ip\";r=0;t=20\n"));
  EXPECT_TRUE(Contains(Normalized(http2[2]),
                       "status 403\n"
                       "content-length: 112\n"
                       "content-type: application/json\n"
                       "ratelimit-policy: \"per-ip\";q=2;w=60\n"
                       "ratelimit: \"per-ip\";r=0;t=20\n"
                       "retry-after: 20\n"));
  EXPECT_TRUE(Contains(Normalized(http2[2]),
                       "\n\n{\"error\":\"rate_limited\",\"rule\":\"per-ip\","
                       "\"retry_after_ms\":20000,\"request_id\":\"<id>\"}\n"));
  EXPECT_TRUE(Contains(Normalized(http2[3]), "status 200\n"));
  EXPECT_TRUE(Lacks(Normalized(http2[3]), "ratelimit"));
  EXPECT_TRUE(Contains(Normalized(http2[4]), "status 400\n"));
  EXPECT_TRUE(Contains(Normalized(http2[4]), "X-Original-URI"));
  EXPECT_TRUE(Contains(Normalized(http2[5]), "status 404\n"));
  const std::string metrics = Metrics();
  EXPECT_TRUE(Contains(metrics, "tollgate_decision_requests_total{protocol=\"http\"} 12\n"));
  EXPECT_TRUE(Contains(metrics, "tollgate_decision_requests_total{protocol=\"rls\"} 0\n"));
  EXPECT_TRUE(Contains(
      metrics, "tollgate_ratelimit_decisions_total{rule=\"per-ip\",decision=\"limited\"} 2\n"));
}

// Over TLS, a client that negotiates h2 by ALPN (curl --http2) gets the
// check endpoint too (gRPC over TLS: TlsServesBothProtocols).
TEST_F(DecisionService, CheckOverTlsHttp2) {
  const TempDir dir;
  const auto [cert, key] = MakeCertificate(dir, "localhost");
  Start(kPerIp, "tls = { cert = \"" + cert + "\", key = \"" + key + "\" }\n");
  const std::string url = "https://localhost:" + std::to_string(decision_port()) + "/check";
  const std::string check = "curl -si --http2 --cacert " + cert +
                            " -H 'X-Original-URI: /api' -H 'X-Real-IP: 192.0.2.1' " + url;
  const std::string first = Shell(check);
  EXPECT_TRUE(Contains(first, "HTTP/2 200 \r\n"));
  EXPECT_TRUE(Contains(first, "ratelimit: \"per-ip\";r=1;t=20\r\n"));
  Shell(check);
  const std::string limited = Shell(check);
  EXPECT_TRUE(Contains(limited, "HTTP/2 429 \r\n"));
  EXPECT_TRUE(Contains(limited, "retry-after: 20\r\n"));
  EXPECT_TRUE(Contains(limited, "{\"error\":\"rate_limited\",\"rule\":\"per-ip\""));
  EXPECT_TRUE(Contains(Metrics(), "tollgate_decision_requests_total{protocol=\"http\"} 3\n"));
}

// A delay rule holds the check's answer over HTTP/2 as over HTTP/1.1: the
// checks beyond the limit are answered 200 once their turn comes. Three
// curl processes at once, each on its own connection (Debian's curl 7.88
// fails a second request on a reused prior-knowledge connection, exit 16,
// with nginx as well); one nghttp connection with two streams at once.
// Real timers; the assertions are about outcomes, not time.
TEST_F(DecisionService, CheckOverHttp2HoldsADelayedRequest) {
  Start(kQueue, "", TestClock::kSteady);
  const std::string url = "http://127.0.0.1:" + std::to_string(decision_port()) + "/check";
  const std::string curl = "curl -s --http2-prior-knowledge -o /dev/null "
                           "-w '%{http_version} %{http_code}\\n' -H 'X-Original-URI: /' " + url;
  const std::string out = Shell("(" + curl + " & " + curl + " & " + curl + " & wait) | sort");
  EXPECT_EQ(out, "2 200\n2 200\n2 200\n");
  // Two streams of one connection at once: both answered 200.
  EXPECT_EQ(Shell("nghttp -nv -H 'x-original-uri: /' " + url + "?a " + url +
                  "?b | grep -c ':status: 200'"),
            "2\n");
  // Of the five checks, at least the two the curls sent beyond the limit
  // were held (more when the nghttp streams came within a window); none
  // was refused.
  const std::string metrics = Metrics();
  const std::string rule = "tollgate_ratelimit_decisions_total{rule=\"queue\",decision=";
  const std::int64_t delayed = IntSample(metrics, rule + "\"delayed\"}");
  EXPECT_GE(delayed, 2) << metrics;
  EXPECT_EQ(IntSample(metrics, rule + "\"allowed\"}") + delayed, 5);
  EXPECT_EQ(IntSample(metrics, rule + "\"limited\"}"), 0);
}

// --- nginx auth_request ---

// nginx (Debian's nginx-light) in front of the echo upstream, asking the
// check endpoint for each request with auth_request, as docs/decision-service.md shows;
// started in the foreground, its log on stderr.
class Nginx {
 public:
  Nginx(std::uint16_t decision_port, std::uint16_t upstream_port)
      : port_(UnusedPort()) {
    const std::string conf = dir_.Write("nginx.conf", Config(decision_port, upstream_port));
    process_ = std::make_unique<Process>(
        std::vector<std::string>{"/usr/sbin/nginx", "-p", dir_.path(), "-c", conf});
    // The master has bound the port before it starts its worker.
    for (std::string line = process_->StderrLine(); !line.empty();
         line = process_->StderrLine()) {
      if (line.find("start worker process") != std::string::npos) return;
    }
    ADD_FAILURE() << "nginx did not start";
  }
  // A fast shutdown: the master stops its worker before it exits (killed,
  // it would leave the worker behind).
  ~Nginx() {
    process_->Signal(SIGTERM);
    process_->Wait();
  }
  std::uint16_t port() const { return port_; }

 private:
  std::string Config(std::uint16_t decision_port, std::uint16_t upstream_port) const {
    const std::string dir = dir_.path();
    return R"(daemon off;
master_process on;
worker_processes 1;
user root;
pid )" + dir + R"(/nginx.pid;
error_log stderr notice;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path )" + dir + R"(/body;
  proxy_temp_path )" + dir + R"(/proxy;
  fastcgi_temp_path )" + dir + R"(/fastcgi;
  uwsgi_temp_path )" + dir + R"(/uwsgi;
  scgi_temp_path )" + dir + R"(/scgi;

  # --- docs/decision-service.md's example, with the test's ports ---
  upstream tollgate_decision {
    server 127.0.0.1:)" + std::to_string(decision_port) + R"(;
    keepalive 64;
  }
  server {
    listen 127.0.0.1:)" + std::to_string(port_) + R"(;
    location / {
      auth_request /.tollgate-check;
      # The check's RateLimit fields and Retry-After, for the client.
      auth_request_set $tollgate_policy $upstream_http_ratelimit_policy;
      auth_request_set $tollgate_ratelimit $upstream_http_ratelimit;
      auth_request_set $tollgate_retry_after $upstream_http_retry_after;
      add_header RateLimit-Policy $tollgate_policy always;
      add_header RateLimit $tollgate_ratelimit always;
      # tollgate answers a limited check with deny_status = 403.
      error_page 403 = @limited;
      proxy_pass http://127.0.0.1:)" + std::to_string(upstream_port) + R"(;
    }
    location = /.tollgate-check {
      internal;
      proxy_pass http://tollgate_decision/check;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
      proxy_set_header X-Original-Method $request_method;
      proxy_set_header X-Original-URI $request_uri;
      proxy_set_header X-Original-Host $host;
      proxy_set_header X-Real-IP $remote_addr;
      # nginx passes the client's own fields on: drop its X-Forwarded-For,
      # or the client would choose the address its key is made of.
      proxy_set_header X-Forwarded-For "";
    }
    location @limited {
      add_header Retry-After $tollgate_retry_after always;
      add_header RateLimit-Policy $tollgate_policy always;
      add_header RateLimit $tollgate_ratelimit always;
      default_type application/json;
      return 429 '{"error":"rate_limited"}\n';
    }
  }
  # --- end of the example ---
}
)";
  }

  TempDir dir_;
  std::uint16_t port_;
  std::unique_ptr<Process> process_;
};

// Clients of nginx see exactly `limit` 2xx per client address and window
// (the upstream's answers, with the RateLimit fields nginx copied from the
// check), then 429 with Retry-After and the fields; nginx passes each
// client's address in X-Real-IP and is the trusted proxy, so every client
// has its own key, which an X-Forwarded-For of the client's own does not
// change (the configuration drops it). A path no rule matches always reaches the upstream.
TEST_F(DecisionService, NginxAuthRequest) {
  Start(kPerIp, "deny_status = 403\n");
  const Nginx nginx(decision_port(), echo_->port());
  // 127.0.0.3 sends an X-Forwarded-For of its own, another each time (nginx
  // passes a client's fields on to the check): it must not choose its key.
  int spoofed = 0;
  const auto get = [&](const std::string& source, const std::string& path) {
    const std::string own = source == "127.0.0.3"
                                ? " -H 'X-Forwarded-For: 198.51.100." +
                                      std::to_string(++spoofed) + "'"
                                : "";
    return Shell("curl -si --interface " + source + own + " http://127.0.0.1:" +
                 std::to_string(nginx.port()) + path);
  };
  for (const std::string source : {"127.0.0.2", "127.0.0.3"}) {
    for (int i = 0; i < 2; ++i) {
      const std::string allowed = get(source, "/api/items");
      EXPECT_TRUE(Contains(allowed, "HTTP/1.1 200 OK\r\n")) << source << " " << i;
      EXPECT_TRUE(Contains(allowed, "X-Upstream-Port: " + std::to_string(echo_->port())));
      EXPECT_TRUE(Contains(allowed, "RateLimit-Policy: \"per-ip\";q=2;w=60\r\n"));
      EXPECT_TRUE(Contains(allowed, "RateLimit: \"per-ip\";r=" + std::to_string(1 - i) + ";t=20\r\n"));
    }
    for (int i = 0; i < 2; ++i) {
      const std::string limited = get(source, "/api/items");
      EXPECT_TRUE(Contains(limited, "HTTP/1.1 429 Too Many Requests\r\n")) << source;
      EXPECT_TRUE(Contains(limited, "Retry-After: 20\r\n"));
      EXPECT_TRUE(Contains(limited, "RateLimit: \"per-ip\";r=0;t=20\r\n"));
      EXPECT_TRUE(Contains(limited, "{\"error\":\"rate_limited\"}"));
      EXPECT_TRUE(Lacks(limited, "X-Upstream-Port"));
    }
  }
  EXPECT_TRUE(Contains(get("127.0.0.2", "/about"), "HTTP/1.1 200 OK\r\n"));
  // The window ends: the client passes again.
  gateway_->clock().Advance(20'000);
  EXPECT_TRUE(Contains(get("127.0.0.2", "/api/items"), "RateLimit: \"per-ip\";r=1;t=60\r\n"));
  const std::string metrics = Metrics();
  EXPECT_TRUE(Contains(metrics, "tollgate_decision_requests_total{protocol=\"http\"} 10\n"));
  EXPECT_TRUE(Contains(
      metrics, "tollgate_ratelimit_decisions_total{rule=\"per-ip\",decision=\"allowed\"} 5\n"));
  EXPECT_TRUE(Contains(
      metrics, "tollgate_ratelimit_decisions_total{rule=\"per-ip\",decision=\"limited\"} 4\n"));
}

}  // namespace
}  // namespace tollgate::testing
