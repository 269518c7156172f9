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

}  // namespace
}  // namespace tollgate::store
