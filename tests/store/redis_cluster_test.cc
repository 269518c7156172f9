// RedisStore on a real three-master Redis Cluster: CRC16 slots as Redis
// computes them, decisions routed to the master of their slot, and a slot
// that holds live keys moved between masters while decisions run: none
// fails and none is lost (MOVED, ASK and TRYAGAIN are followed, also
// while the two masters send the slot's commands to each other); masters
// that never agree fail a command at its deadline; calls that share
// decisions or lease takes keep to one slot.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <set>
#include <thread>

#include "redis_server.h"
#include "store/redis_coordinator.h"
#include "store/redis_store.h"
#include "store_sinks.h"

namespace tollgate::store {
namespace {

using testing::RedisCluster;
using testing::RedisServer;

RedisOptions ClusterOptions(RedisCluster& cluster) {
  RedisOptions o;
  std::string error;
  o.nodes.push_back(*ParseRedisUrl("redis://" + cluster.seed(), error));
  o.timeout_ms = 2000;
  return o;
}

TEST(RedisSlot, MatchesRedisClusterKeyslot) {
  EXPECT_EQ(RedisSlot("123456789"), 12739);  // CRC16/XMODEM check value 0x31C3
  EXPECT_EQ(RedisSlot("foo"), 12182);
  EXPECT_EQ(RedisSlot("{user1000}.following"), RedisSlot("{user1000}.followers"));
  RedisCluster cluster;
  // Empty tags ("foo{}{bar}", "{}x": the whole key is hashed), several
  // braces, escaped bytes, a long key: as Redis computes them.
  const std::vector<std::string> keys{"a",
                                      "tollgate:{r:%7F%00%00%01}:0a1b2c3d:0",
                                      "foo{}{bar}",
                                      "{}x",
                                      "{a}{b}",
                                      "x{y}z",
                                      std::string(300, 'k')};
  for (const std::string& key : keys) {
    EXPECT_EQ(std::to_string(RedisSlot(key)), cluster.node(0).Command({"CLUSTER", "KEYSLOT", key}))
        << key;
  }
}

class RedisClusterStore : public ::testing::Test {
 protected:
  StoreResult Decide(RedisStore& store, const std::string& key, const LimitSpec& spec) {
    Result r;
    store.Decide({key, &spec, 1, 0}, r);
    while (!r.done) io_.run_one();
    return r.result;
  }
  RedisCluster cluster_;
  boost::asio::io_context io_;
  RedisHealth health_;
};

TEST_F(RedisClusterStore, DecisionsGoToTheMasterOfTheirSlot) {
  const RedisOptions options = ClusterOptions(cluster_);
  bool fatal = false;
  ASSERT_EQ(CheckRedis(options, fatal), std::nullopt);
  RedisStore store(io_, options, health_);
  const LimitSpec spec = FixedWindow(3, 3'600'000);
  std::set<std::size_t> owners;
  for (int k = 0; k < 30; ++k) {
    const std::string key = "key" + std::to_string(k);
    for (int i = 0; i < 3; ++i) {
      const StoreResult r = Decide(store, key, spec);
      ASSERT_EQ(r.status, StoreStatus::kOk);
      EXPECT_TRUE(r.decision.allowed);
    }
    const StoreResult r = Decide(store, key, spec);
    ASSERT_EQ(r.status, StoreStatus::kOk);
    EXPECT_FALSE(r.decision.allowed);
    owners.insert(cluster_.OwnerOf(RedisKey(options.prefix, key, spec.fingerprint, 0)));
  }
  EXPECT_EQ(owners.size(), 3u);             // the keys are spread over every master
  EXPECT_EQ(health_.redirects.load(), 0u);  // the slot map was right from the start
}

TEST_F(RedisClusterStore, ConcurrentTokenBucketDecisionsOfManyKeysKeepToTheirSlots) {
  // A single token_bucket window's decisions of one turn share calls
  // without Redis Cluster; here every call keeps to one key (one slot).
  const RedisOptions options = ClusterOptions(cluster_);
  RedisStore store(io_, options, health_);
  const LimitSpec spec = TokenBucket(10, 1000, 3);
  // 20 keys, 5 decisions each, interleaved, in one turn: 3 of each key pass.
  std::vector<Result> results(100);
  for (std::size_t i = 0; i < results.size(); ++i) {
    store.Decide({"key" + std::to_string(i % 20), &spec, 1, 0}, results[i]);
  }
  for (std::size_t i = 0; i < results.size(); ++i) {
    while (!results[i].done) io_.run_one();
    ASSERT_EQ(results[i].result.status, StoreStatus::kOk) << i;
    EXPECT_EQ(results[i].result.decision.allowed, i < 60) << i;
  }
  EXPECT_EQ(health_.coalesced.load(), 80u);  // each key's 4 later decisions
}

TEST_F(RedisClusterStore, LeaseTakesOfManyKeysSentTogetherKeepToTheirSlots) {
  // Lease takes of one turn share calls without Redis Cluster; here a
  // call takes only for one key (one slot).
  const RedisOptions options = ClusterOptions(cluster_);
  RedisStore store(io_, options, health_);
  // A window's takes (lease_take.lua, two keys per window) and a single
  // token bucket's (lease_take_fused.lua, one key), leased or spent.
  std::uint64_t coalesced = 0;
  for (const LimitSpec& spec : {FixedWindow(5, 3'600'000), TokenBucket(1, 86'400'000, 5)}) {
    for (const algorithms::TakeUse use : {algorithms::TakeUse::kLease, algorithms::TakeUse::kSpent}) {
      const std::string prefix = std::string(use == algorithms::TakeUse::kSpent ? "s" : "l") +
                                 std::to_string(spec.fingerprint) + "key";
      // 20 keys, 2 takes of 2 units each, interleaved, in one turn: 2 + 2 of 5.
      std::vector<Values> results(40);
      for (std::size_t i = 0; i < results.size(); ++i) {
        store.TakeLease(prefix + std::to_string(i % 20), spec, 0, 2, 1000, 1000, results[i], use);
      }
      for (std::size_t i = 0; i < results.size(); ++i) {
        while (!results[i].done) io_.run_one();
        ASSERT_EQ(results[i].result.status, StoreStatus::kOk) << i;
        ASSERT_GE(results[i].result.values.size(), 3u) << i;
        EXPECT_EQ(results[i].result.values[0], 2) << i;
      }
      coalesced += 20;  // each key's second take
      EXPECT_EQ(health_.coalesced.load(), coalesced);
    }
  }
  EXPECT_EQ(health_.errors.load(), 0u);
}

TEST_F(RedisClusterStore, AMigratingSlotLosesNoDecision) {
  const RedisOptions options = ClusterOptions(cluster_);
  RedisStore store(io_, options, health_);
  RedisCoordinator coordinator(store);
  const LimitSpec spec = FixedWindow(1'000'000, 3'600'000);
  // Several rule keys that share one slot (same hash tag content is not
  // possible for different keys: find keys of one slot instead).
  const std::string first = "hot0";
  const std::uint16_t slot = RedisSlot(RedisKey(options.prefix, first, spec.fingerprint, 0));
  std::vector<std::string> keys{first};
  for (int i = 1; keys.size() < 4; ++i) {
    const std::string k = "hot" + std::to_string(i);
    if (RedisSlot(RedisKey(options.prefix, k, spec.fingerprint, 0)) == slot) keys.push_back(k);
  }
  for (const std::string& k : keys) ASSERT_EQ(Decide(store, k, spec).status, StoreStatus::kOk);
  const std::size_t from = cluster_.OwnerOf(RedisKey(options.prefix, first, spec.fingerprint, 0));
  const std::size_t to = (from + 1) % 3;

  std::atomic<bool> moved{false};
  std::jthread migrate([&] {
    cluster_.MoveSlot(slot, from, to, 30);
    moved = true;
  });
  std::vector<std::int64_t> decided(keys.size(), 1);
  int after_move = 0;
  while (after_move < 20) {
    // A pipelined batch: one decision per key.
    std::vector<Result> batch(keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) store.Decide({keys[i], &spec, 1, 0}, batch[i]);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      while (!batch[i].done) io_.run_one();
      ASSERT_EQ(batch[i].result.status, StoreStatus::kOk) << "key " << keys[i];
      ASSERT_TRUE(batch[i].result.decision.allowed);
      ++decided[i];
      // No decision lost: the count goes on where it was, on either node.
      ASSERT_EQ(batch[i].result.decision.remaining, spec.windows[0].limit - decided[i]);
    }
    if (moved) ++after_move;
  }
  migrate.join();
  EXPECT_EQ(cluster_.OwnerOf(RedisKey(options.prefix, first, spec.fingerprint, 0)), to);
  EXPECT_GT(health_.redirects.load(), 0u);
  // The upstream-protection scripts follow the slot too.
  InflightGuard place;
  Answer answer;
  coordinator.AcquirePlace(keys[0], 1, 0, place, answer);
  while (!answer.done) io_.run_one();
  EXPECT_EQ(answer.result.status, StoreStatus::kOk);
  EXPECT_EQ(answer.result.value, 1);
}

TEST_F(RedisClusterStore, MastersThatKeepDisagreeingAboutASlotFailItsCommandsAtTheirDeadline) {
  RedisOptions options = ClusterOptions(cluster_);
  options.timeout_ms = 200;
  RedisStore store(io_, options, health_);
  const LimitSpec spec = FixedWindow(10, 3'600'000);
  const std::string key = RedisKey(options.prefix, "k", spec.fingerprint, 0);
  // The owner hands the (empty) slot to another master that is never told:
  // each sends the slot's commands to the other, for good.
  const std::size_t from = cluster_.OwnerOf(key);
  RedisServer& to = cluster_.node((from + 1) % 3);
  ASSERT_EQ(cluster_.node(from).Command({"CLUSTER", "SETSLOT", std::to_string(RedisSlot(key)),
                                         "NODE", to.Command({"CLUSTER", "MYID"})}),
            "OK");
  EXPECT_EQ(Decide(store, "k", spec).status, StoreStatus::kTimeout);
  // Followed at a pace, not at once: about one MOVED per retry pause.
  EXPECT_GT(health_.redirects.load(), 2u);
  EXPECT_LT(health_.redirects.load(), 200u / 5 + 10);
}

}  // namespace
}  // namespace tollgate::store
