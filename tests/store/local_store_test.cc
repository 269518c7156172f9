#include "store/local_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/validate.h"

namespace tollgate::store {
namespace {

using algorithms::Algorithm;
using algorithms::LimitParams;

LimitSpec Spec(Algorithm a, std::int64_t limit, std::int64_t window_ms, std::int64_t burst = 0) {
  return LimitSpec::Make(
      {LimitParams{a, limit, window_ms, burst, 10, algorithms::Shaping::kNoDelay}});
}

class RecordingSink : public DecisionSink {
 public:
  void OnDecision(const StoreResult& r) override {
    ++calls;
    last = r;
  }
  int calls = 0;
  StoreResult last;
};

TEST(LocalStore, CompletesInline) {
  LocalStore store;
  const LimitSpec spec = Spec(Algorithm::kFixedWindow, 1, 1000);
  RecordingSink sink;
  store.Decide({"k", &spec, 1, 0}, sink);
  EXPECT_EQ(sink.calls, 1);
  EXPECT_TRUE(sink.last.decision.allowed);
  store.Decide({"k", &spec, 1, 1}, sink);
  EXPECT_EQ(sink.calls, 2);
  EXPECT_FALSE(sink.last.decision.allowed);
}

TEST(LocalStore, KeysAreIndependentAndOpaque) {
  LocalStore store;
  const LimitSpec spec = Spec(Algorithm::kFixedWindow, 1, 1000);
  const std::string binary("a\0b", 3);
  EXPECT_TRUE(store.DecideNow({binary, &spec, 1, 0}).allowed);
  EXPECT_TRUE(store.DecideNow({std::string_view("a\0c", 3), &spec, 1, 0}).allowed);
  EXPECT_FALSE(store.DecideNow({binary, &spec, 1, 0}).allowed);
  EXPECT_EQ(store.KeyCount(), 2u);
}

TEST(LocalStore, AKeyHashGivenByTheCallerFindsTheKeysState) {
  LocalStore store;
  const LimitSpec spec = Spec(Algorithm::kFixedWindow, 2, 1000);
  const std::uint64_t hash = KeyHash("k");
  EXPECT_TRUE(store.DecideNow({"k", &spec, 1, 0, 0, hash}).allowed);
  EXPECT_TRUE(store.DecideNow({"k", &spec, 1, 0}).allowed);
  EXPECT_FALSE(store.DecideNow({"k", &spec, 1, 0, 0, hash}).allowed);
  EXPECT_EQ(store.KeyCount(), 1u);
  EXPECT_TRUE(store.Erase("k", 0));
  EXPECT_TRUE(store.DecideNow({"k", &spec, 1, 0, 0, hash}).allowed);
}

TEST(LocalStore, ChangedLimitStartsAfresh) {
  LocalStore store;
  const LimitSpec one = Spec(Algorithm::kFixedWindow, 1, 1000);
  const LimitSpec two = Spec(Algorithm::kFixedWindow, 2, 1000);
  EXPECT_TRUE(store.DecideNow({"k", &one, 1, 0}).allowed);
  EXPECT_FALSE(store.DecideNow({"k", &one, 1, 0}).allowed);
  EXPECT_EQ(store.DecideNow({"k", &two, 1, 0}).remaining, 1);
}

TEST(LocalStore, ExpiredStateIsSweptIncrementally) {
  LocalStoreOptions options;
  options.shards = 1;
  LocalStore store(options);
  const LimitSpec spec = Spec(Algorithm::kFixedWindow, 5, 100);
  for (int i = 0; i < 100; ++i) store.DecideNow({"key" + std::to_string(i), &spec, 1, 0});
  EXPECT_EQ(store.KeyCount(), 100u);
  // Every later decision sweeps a couple of slots; a few hundred pass over all.
  for (int i = 0; i < 300; ++i) store.DecideNow({"live", &spec, 1, 1000 + i});
  EXPECT_EQ(store.KeyCount(), 1u);
  EXPECT_EQ(store.Evictions(), 0u);
}

TEST(LocalStore, StateIsNeverSweptBeforeItIsFresh) {
  LocalStoreOptions options;
  options.shards = 1;
  LocalStore store(options);
  const LimitSpec spec = Spec(Algorithm::kFixedWindow, 3, 100);
  for (int i = 0; i < 3; ++i) store.DecideNow({"spent", &spec, 1, 1'000'050});
  // The hand passes over "spent" many times while its window is still on
  // (expiries are kept in coarse ticks, rounded up).
  for (int i = 0; i < 300; ++i) store.DecideNow({"other" + std::to_string(i), &spec, 1, 1'000'099});
  EXPECT_FALSE(store.DecideNow({"spent", &spec, 1, 1'000'099}).allowed);
  EXPECT_TRUE(store.DecideNow({"spent", &spec, 1, 1'000'100}).allowed);
}

TEST(LocalStore, FullStoreEvictsAndCountsEvictions) {
  LocalStoreOptions options;
  options.shards = 4;
  options.max_keys = 64;
  LocalStore store(options);
  const LimitSpec spec = Spec(Algorithm::kFixedWindow, 5, 1'000'000);
  for (int i = 0; i < 1000; ++i) store.DecideNow({"key" + std::to_string(i), &spec, 1, 0});
  EXPECT_LE(store.KeyCount(), 64u);
  EXPECT_GE(store.Evictions(), 1000u - 64u);
}

TEST(LocalStore, EvictionPrefersKeysNotRecentlyUsed) {
  LocalStoreOptions options;
  options.shards = 1;
  options.max_keys = 8;
  LocalStore store(options);
  const LimitSpec spec = Spec(Algorithm::kFixedWindow, 1000, 1'000'000);
  for (int round = 0; round < 50; ++round) {
    store.DecideNow({"hot", &spec, 1, 0});
    store.DecideNow({"cold" + std::to_string(round), &spec, 1, 0});
  }
  // "hot" survived every eviction: 50 decisions counted.
  EXPECT_EQ(store.DecideNow({"hot", &spec, 1, 0}).remaining, 1000 - 51);
}

TEST(LocalStoreSettle, ARefundIsSeenByTheNextDecisionAndCompletesInline) {
  LocalStore store;
  const LimitSpec spec = Spec(Algorithm::kTokenBucket, 1, 1'000'000, 100);
  const DecideRequest reservation{"k", &spec, 100, 5};
  ASSERT_TRUE(store.DecideNow(reservation).allowed);
  EXPECT_FALSE(store.DecideNow({"k", &spec, 1, 5}).allowed);
  RecordingSink sink;
  store.Settle({reservation, 40, 6}, sink);
  EXPECT_EQ(sink.calls, 1);
  EXPECT_EQ(sink.last.status, StoreStatus::kOk);
  EXPECT_EQ(sink.last.decision.remaining, 60);
  EXPECT_TRUE(store.DecideNow({"k", &spec, 60, 6}).allowed);
  EXPECT_FALSE(store.DecideNow({"k", &spec, 1, 6}).allowed);
}

TEST(LocalStoreSettle, DebtKeepsTheKeyUntilItIsPaidOff) {
  LocalStoreOptions options;
  options.shards = 1;
  LocalStore store(options);
  const LimitSpec spec = Spec(Algorithm::kTokenBucket, 10, 1000, 10);
  const DecideRequest reservation{"debtor", &spec, 10, 1'000'000};
  ASSERT_TRUE(store.DecideNow(reservation).allowed);
  const algorithms::Decision d = store.SettleNow({reservation, 20, 1'000'000});
  EXPECT_EQ(d.retry_after_ms, 1100);  // 10 tokens of debt, then one more
  // The hand passes over the key many times before its debt is paid.
  for (int i = 0; i < 300; ++i) {
    store.DecideNow({"other" + std::to_string(i), &spec, 1, 1'001'099});
  }
  EXPECT_FALSE(store.DecideNow({"debtor", &spec, 1, 1'001'099}).allowed);
  EXPECT_TRUE(store.DecideNow({"debtor", &spec, 1, 1'001'100}).allowed);
}

TEST(LocalStoreSettle, AKeyWithoutStateIsSettledOnAFreshState) {
  LocalStore store;
  const LimitSpec spec = Spec(Algorithm::kFixedWindow, 10, 1000);
  // A refund has nothing to give back; a charge starts the count.
  EXPECT_EQ(store.SettleNow({{"gone", &spec, 5, 100}, 0, 200}).remaining, 10);
  EXPECT_EQ(store.SettleNow({{"gone2", &spec, 5, 100}, 8, 200}).remaining, 7);
  EXPECT_FALSE(store.DecideNow({"gone2", &spec, 8, 300}).allowed);
}

// Reserve the most a request may cost, settle to what it cost: however the
// threads interleave, the units settled never exceed the bucket, and the
// refunds let requests in until little more than a reservation per thread
// is left.
TEST(LocalStoreSettle, SettledUnitsNeverExceedTheBudgetAcrossThreads) {
  LocalStore store;
  constexpr std::int64_t kBudget = 10'000;
  constexpr std::int64_t kReserve = 10;
  // Refills one token in 10^10 ms: nothing during the test.
  const LimitSpec spec = Spec(Algorithm::kTokenBucket, 1, 10'000'000'000, kBudget);
  std::atomic<std::int64_t> settled{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5000; ++i) {
        const DecideRequest reservation{"shared", &spec, kReserve, 5};
        if (!store.DecideNow(reservation).allowed) continue;
        const std::int64_t actual = (i * 7 + t) % (kReserve + 1);
        store.SettleNow({reservation, actual, 5});
        settled.fetch_add(actual);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(settled.load(), kBudget);
  // Each thread's last refund may come after the others stopped asking.
  EXPECT_GE(settled.load(), kBudget - 5 * kReserve);
}

TEST(LocalStore, SameKeyAcrossThreadsIsExact) {
  LocalStore store;
  const LimitSpec spec = Spec(Algorithm::kFixedWindow, 10000, 1'000'000);
  std::atomic<int> allowed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5000; ++i) {
        if (store.DecideNow({"shared", &spec, 1, 5}).allowed) allowed.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(allowed.load(), 10000);
}

TEST(LocalStore, ManyKeysAcrossThreads) {
  LocalStoreOptions options;
  options.max_keys = 5000;
  LocalStore store(options);
  const LimitSpec spec = Spec(Algorithm::kSlidingLog, 3, 1000);
  std::atomic<int> allowed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20000; ++i) {
        const std::string key = "k" + std::to_string((i * 7 + t) % 1000);
        if (store.DecideNow({key, &spec, 1, i / 100}).allowed) allowed.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(store.KeyCount(), 5000u);
  EXPECT_GT(allowed.load(), 0);
}

// Issue 26, defect 5: a flood of keys in one rule's partition evicts keys of
// that partition only.
TEST(LocalStorePartitions, AFloodEvictsOnlyInItsOwnPartition) {
  LocalStoreOptions options;
  options.max_keys = 1000;
  LocalStore store(options);
  const std::vector<PartitionShare> shares = {{"per-key", 500}, {"per-ip", 500}};
  const std::vector<std::uint32_t> p = store.AssignPartitions(shares);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_NE(p[0], p[1]);
  const LimitSpec one = Spec(Algorithm::kFixedWindow, 1, 1'000'000);
  const LimitSpec many = Spec(Algorithm::kFixedWindow, 1000, 1'000'000);
  EXPECT_TRUE(store.DecideNow({"per-ip\x1fvictim", &one, 1, 0, p[1]}).allowed);
  EXPECT_FALSE(store.DecideNow({"per-ip\x1fvictim", &one, 1, 0, p[1]}).allowed);
  for (int i = 0; i < 20'000; ++i) {
    store.DecideNow({"per-key\x1f" + std::to_string(i), &many, 1, i, p[0]});
  }
  // Still limited: its state was not evicted.
  EXPECT_FALSE(store.DecideNow({"per-ip\x1fvictim", &one, 1, 20'000, p[1]}).allowed);
  EXPECT_EQ(store.Stats(p[1]).keys, 1u);
  EXPECT_EQ(store.Stats(p[1]).evictions, 0u);
  EXPECT_LE(store.Stats(p[0]).keys, 500u);
  EXPECT_GE(store.Stats(p[0]).evictions, 20'000u - 500u);
  EXPECT_LE(store.KeyCount(), 1000u);
  EXPECT_EQ(store.Evictions(), store.Stats(p[0]).evictions);
}

TEST(LocalStorePartitions, EachPartitionKeepsItsOwnBound) {
  LocalStoreOptions options;
  options.max_keys = 1000;
  LocalStore store(options);
  const std::vector<PartitionShare> shares = {{"small", 10}, {"big", 990}};
  const std::vector<std::uint32_t> p = store.AssignPartitions(shares);
  const LimitSpec spec = Spec(Algorithm::kFixedWindow, 5, 1'000'000);
  for (int i = 0; i < 5000; ++i) {
    store.DecideNow({"small\x1f" + std::to_string(i), &spec, 1, 0, p[0]});
    store.DecideNow({"big\x1f" + std::to_string(i), &spec, 1, 0, p[1]});
  }
  EXPECT_EQ(store.Stats(p[0]).keys, 10u);
  EXPECT_LE(store.Stats(p[1]).keys, 990u);
  EXPECT_GE(store.Stats(p[1]).keys, 900u);  // shards fill unevenly, but 5000 keys fill them all
  EXPECT_LE(store.KeyCount(), 1000u);
}

TEST(LocalStorePartitions, ANameKeepsItsPartitionAndStateRemovedOnesAreEmptied) {
  LocalStoreOptions options;
  options.max_keys = 300;
  LocalStore store(options);
  const LimitSpec spec = Spec(Algorithm::kFixedWindow, 1, 1'000'000);
  const std::vector<PartitionShare> first = {{"a", 100}, {"b", 200}};
  const std::vector<std::uint32_t> p = store.AssignPartitions(first);
  EXPECT_TRUE(store.DecideNow({"a\x1fk", &spec, 1, 0, p[0]}).allowed);
  for (int i = 0; i < 50; ++i) store.DecideNow({"b\x1f" + std::to_string(i), &spec, 1, 0, p[1]});
  EXPECT_EQ(store.KeyCount(), 51u);

  // "b" is gone, "c" and "d" are new: "a" keeps its partition and its state
  // (under a smaller share); b's keys are freed and its partition is reused.
  const std::vector<PartitionShare> second = {{"c", 100}, {"a", 100}, {"d", 100}};
  const std::vector<std::uint32_t> q = store.AssignPartitions(second);
  EXPECT_EQ(q[1], p[0]);
  EXPECT_NE(q[0], q[2]);
  EXPECT_NE(q[0], q[1]);
  EXPECT_NE(q[2], q[1]);
  EXPECT_FALSE(store.DecideNow({"a\x1fk", &spec, 1, 0, q[1]}).allowed);
  EXPECT_EQ(store.KeyCount(), 1u);
  EXPECT_EQ(store.Stats(q[0]).keys + store.Stats(q[2]).keys, 0u);

  // The same names again (a reload of an unchanged file): nothing moves.
  EXPECT_EQ(store.AssignPartitions(second), q);
  EXPECT_FALSE(store.DecideNow({"a\x1fk", &spec, 1, 0, q[1]}).allowed);
}

TEST(LocalStorePartitions, ASmallerShareShrinksThePartitionAsKeysArrive) {
  LocalStoreOptions options;
  options.max_keys = 64;
  options.shards = 1;
  LocalStore store(options);
  const LimitSpec spec = Spec(Algorithm::kFixedWindow, 5, 1'000'000);
  const std::vector<PartitionShare> whole = {{"a", 64}};
  const std::uint32_t a = store.AssignPartitions(whole)[0];
  for (int i = 0; i < 64; ++i) store.DecideNow({"a\x1f" + std::to_string(i), &spec, 1, 0, a});
  EXPECT_EQ(store.Stats(a).keys, 64u);
  const std::vector<PartitionShare> halves = {{"a", 32}, {"b", 32}};
  ASSERT_EQ(store.AssignPartitions(halves)[0], a);
  // Each new key evicts two old ones until the partition is within its share.
  for (int i = 0; i < 32; ++i) store.DecideNow({"a\x1fnew" + std::to_string(i), &spec, 1, 0, a});
  EXPECT_EQ(store.Stats(a).keys, 32u);
}

TEST(LocalStorePartitions, DecisionsGoOnWhilePartitionsAreAssigned) {
  LocalStoreOptions options;
  options.max_keys = 10'000;
  LocalStore store(options);
  const LimitSpec spec = Spec(Algorithm::kTokenBucket, 10, 1000, 10);
  const std::vector<PartitionShare> first = {{"r0", 5000}, {"r1", 5000}};
  const std::vector<std::uint32_t> p = store.AssignPartitions(first);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      // Indices of the first assignment, as a request of an old
      // configuration would still use them.
      for (int i = 0; !stop.load(std::memory_order_relaxed) || i < 2000; ++i) {
        const std::string key = "r" + std::to_string(t) + "\x1f" + std::to_string(i % 3000);
        store.DecideNow({key, &spec, 1, i, p[static_cast<std::size_t>(t)]});
      }
    });
  }
  // Up to 200 rules, partitions added (the directory grows) and reused.
  for (int round = 1; round <= 200; ++round) {
    std::vector<std::string> names;
    for (int r = 0; r < round; r += (round % 3) + 1) names.push_back("r" + std::to_string(r));
    std::vector<PartitionShare> shares;
    for (const std::string& n : names) shares.push_back({n, 10'000 / names.size()});
    const std::vector<std::uint32_t> q = store.AssignPartitions(shares);
    if (names[0] == "r0") {
      EXPECT_EQ(q[0], p[0]);
    }
  }
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_LE(store.KeyCount(), 10'000u + 1024u);
}

}  // namespace
}  // namespace tollgate::store
