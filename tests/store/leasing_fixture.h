// What the LeasingStore tests share: gateways (a LeasingStore in front of
// its own Redis store) on one real redis-server and a manual clock.
#pragma once

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "redis_server.h"
#include "store/leasing_store.h"
#include "store_sinks.h"

namespace tollgate::store {

inline std::uint64_t EvalshaCalls(testing::RedisServer& redis) {
  const std::string stats = redis.Command({"INFO", "commandstats"});
  const std::size_t at = stats.find("cmdstat_evalsha:calls=");
  if (at == std::string::npos) return 0;
  return std::stoull(stats.substr(at + 22));
}

inline LimitSpec Leased(LimitSpec spec, std::int64_t ttl_ms, std::int64_t max_units) {
  spec.lease = LimitSpec::Lease{ttl_ms, max_units, "r"};
  return spec;
}

// One gateway: a LeasingStore in front of its own Redis store.
struct Gateway {
  Gateway(boost::asio::io_context& io, testing::RedisServer& redis, const Clock& clock,
          LeaseStats& stats) {
    std::string error;
    RedisOptions o;
    o.address = *ParseRedisUrl(redis.url(), error);
    o.timeout_ms = 1000;
    o.time = RedisTime::kClient;
    o.min_ttl_ms = 10'000'000;  // virtual time outruns no key
    auto store = std::make_unique<RedisStore>(io, o, health);
    RedisStore& raw = *store;
    leasing = std::make_unique<LeasingStore>(io, std::move(store), nullptr, raw, clock, stats,
                                             LeasingStore::Options{});
  }
  RedisHealth health;
  std::unique_ptr<LeasingStore> leasing;
};

class LeasingStoreTest : public ::testing::Test {
 protected:
  // Decides and waits for the answer; `inline_answer` tells whether it came
  // before Decide returned.
  StoreResult Decide(LeasingStore& store, std::string_view key, const LimitSpec& spec,
                     bool* inline_answer = nullptr, std::int64_t cost = 1) {
    Result r;
    store.Decide({key, &spec, cost, clock_.NowMs()}, r);
    if (inline_answer != nullptr) *inline_answer = r.done;
    while (!r.done) io_.run_one();
    return r.result;
  }
  // Lets replies in flight (background takes, returns) arrive.
  void Settle() {
    for (int i = 0; i < 3; ++i) io_.run_for(std::chrono::milliseconds(1));
  }
  // Twelve requests of `key` in a row, all allowed: the gateway's leases
  // grow on the burst, and it holds units when it goes quiet.
  void Burst(LeasingStore& store, std::string_view key, const LimitSpec& spec) {
    for (int i = 0; i < 12; ++i) {
      ASSERT_TRUE(Decide(store, key, spec).decision.allowed);
      Settle();
    }
    Settle();
  }

  testing::RedisServer redis_;
  boost::asio::io_context io_;
  ManualClock clock_{1'000'000};
  LeaseStats stats_;
};

}  // namespace tollgate::store
