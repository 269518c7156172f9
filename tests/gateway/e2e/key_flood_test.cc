// Issue 26, defect 5: one rule's key flood must not reset another rule's
// counters. Every rule has its own share of the local store's [store]
// max_keys, so a client sending thousands of distinct X-Key values evicts
// only keys of the header rule, never the per-IP state of a client that
// was limited.
#include <gtest/gtest.h>

#include <string>

#include "rules/config.h"
#include "test_support.h"

namespace tollgate::testing {
namespace {

// Both rules apply to every request; the header rule only to requests that
// send X-Key. [store] max_keys = 200: 100 keys for each rule.
constexpr const char* kStore = R"(
[store]
max_keys = 200
)";
constexpr const char* kRules = R"(
[[rules]]
name = "per-ip"
key = "ip"
algorithm = "fixed_window"
limit = 3
window = "1h"
[[rules]]
name = "per-key"
key = "header:X-Key"
algorithm = "fixed_window"
limit = 1000
window = "1h"
)";

// More distinct X-Key values than the whole store holds, many times over.
constexpr int kFloodKeys = 3000;

// The value of one series of the gateway's /metrics.
std::int64_t Metric(const TestGateway& gateway, const std::string& series) {
  Client admin(gateway.admin_port());
  const std::string text = admin.Get("/metrics").body();
  const std::string line = "\n" + series + " ";
  const std::size_t at = text.find(line);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no " << series << " in\n" << text;
    return -1;
  }
  return std::stoll(text.substr(at + line.size()));
}

// The local store's keys (also with [store] kind = "redis", where the local
// store is the fallback).
std::int64_t LocalStoreKeys(const TestGateway& gateway) {
  return Metric(gateway, "tollgate_local_store_keys");
}

void Flood(const TestGateway& gateway) {
  // Another client (its own IP, so its own per-ip key): the per-ip rule
  // refuses it after 3 requests, but every request still has its X-Key
  // decided, each a new key of "per-key".
  Client flooder(gateway.port(), 5000, "127.0.0.3");
  for (int i = 0; i < kFloodKeys; ++i) {
    const Response res = flooder.Get("/", "X-Key: flood-" + std::to_string(i) + "\r\n");
    ASSERT_TRUE(res.result_int() == 200 || res.result_int() == 429) << res.result_int();
  }
}

TEST(KeyFlood, ALimitedClientStaysLimitedWhileAnotherRuleIsFlooded) {
  auto echo = StartEcho();
  TestGateway gateway(BasicConfig(std::string(kStore) + kRules), echo->port());
  Client client(gateway.port(), 5000, "127.0.0.2");
  for (int i = 0; i < 3; ++i) ASSERT_EQ(client.Get("/").result_int(), 200);
  ASSERT_EQ(client.Get("/").result_int(), 429);

  Flood(gateway);

  // The clock has not moved: the window is still on, and the per-ip state of
  // 127.0.0.2 is still there (before the fix the flood had evicted it, and
  // the client got 200 again).
  const Response res = client.Get("/");
  EXPECT_EQ(res.result_int(), 429);
  EXPECT_EQ(res["RateLimit"], "\"per-ip\";r=0;t=2600");
  // The store stayed within its bound; the flood evicted keys of its own rule.
  EXPECT_LE(LocalStoreKeys(gateway), 200);
  EXPECT_EQ(
      Metric(gateway, R"(tollgate_ratelimit_decisions_total{rule="per-key",decision="allowed"})"),
      kFloodKeys);
  EXPECT_EQ(Metric(gateway, R"(tollgate_local_store_evictions_total{rule="per-key"})"),
            kFloodKeys - 100);
  EXPECT_EQ(Metric(gateway, R"(tollgate_local_store_evictions_total{rule="per-ip"})"), 0);
}

TEST(KeyFlood, AReloadThatAddsARuleKeepsTheLimitedClientLimited) {
  auto echo = StartEcho();
  TestGateway gateway(BasicConfig(std::string(kStore) + kRules), echo->port());
  Client client(gateway.port(), 5000, "127.0.0.2");
  for (int i = 0; i < 3; ++i) ASSERT_EQ(client.Get("/").result_int(), 200);
  ASSERT_EQ(client.Get("/").result_int(), 429);

  // A third rule: the shares become 67, 67 and 66 keys; "per-ip" keeps its
  // own part of the store, and its state.
  const std::string more = std::string(kStore) + kRules + R"(
[[rules]]
name = "per-route"
key = "route"
algorithm = "fixed_window"
limit = 1000
window = "1h"
)";
  rules::LoadResult loaded =
      rules::LoadConfigText(WithEchoPort(BasicConfig(more), echo->port()), "flood.toml");
  ASSERT_TRUE(loaded.config) << loaded.errors[0].ToString();
  std::string error;
  ASSERT_TRUE(gateway.server().Reload(std::make_shared<const rules::Config>(*loaded.config), error))
      << error;

  Flood(gateway);
  EXPECT_EQ(client.Get("/").result_int(), 429);
  EXPECT_LE(LocalStoreKeys(gateway), 200);
}

// With Redis unreachable and on_error = "local", the local store decides,
// in the same parts per rule.
TEST(KeyFlood, TheLocalFallbackOfRedisKeepsTheRulesApart) {
  auto echo = StartEcho();
  std::string store = RedisStoreSection("url = \"redis://127.0.0.1:1\"", "local", "50ms");
  store.replace(store.find("[store]\n"), 8, "[store]\nmax_keys = 200\n");
  TestGateway gateway(BasicConfig(store + kRules), echo->port());
  Client client(gateway.port(), 5000, "127.0.0.2");
  for (int i = 0; i < 3; ++i) ASSERT_EQ(client.Get("/").result_int(), 200);
  ASSERT_EQ(client.Get("/").result_int(), 429);

  Flood(gateway);
  EXPECT_EQ(client.Get("/").result_int(), 429);
  EXPECT_LE(LocalStoreKeys(gateway), 200);
  EXPECT_GE(Metric(gateway, R"(tollgate_store_fallback_total{policy="local"})"), 2 * kFloodKeys);
}

}  // namespace
}  // namespace tollgate::testing
