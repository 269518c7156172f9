// InflightTable: bounded places per key, released by guards on every path,
// exact under threads; and LearnedLimits' bound.
#include "store/inflight.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "store/learned_limits.h"

namespace tollgate::store {
namespace {

TEST(Inflight, AtMostMaxPlacesPerKeyGivenBackByGuards) {
  InflightTable table;
  std::optional<InflightGuard> a = table.TryAcquire("k", 2);
  std::optional<InflightGuard> b = table.TryAcquire("k", 2);
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(table.TryAcquire("k", 2));
  EXPECT_TRUE(table.TryAcquire("other", 2));  // released at once: a temporary
  EXPECT_EQ(table.Count("k"), 2);
  a.reset();
  EXPECT_EQ(table.Count("k"), 1);
  InflightGuard moved = std::move(*b);
  b.reset();  // the moved-from guard holds nothing
  EXPECT_EQ(table.Count("k"), 1);
  moved.Release();
  moved.Release();  // once only
  EXPECT_EQ(table.Count("k"), 0);
  EXPECT_EQ(table.KeyCount(), 0u);
}

TEST(Inflight, ThreadsNeverHoldMoreThanMax) {
  InflightTable table;
  constexpr std::int64_t kMax = 3;
  std::atomic<std::int64_t> holding{0}, most{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20'000; ++i) {
        if (auto place = table.TryAcquire(i % 2 ? "shared" : "k" + std::to_string(i % 7), kMax)) {
          if (i % 2) {
            const std::int64_t now = ++holding;
            std::int64_t seen = most.load();
            while (now > seen && !most.compare_exchange_weak(seen, now)) {
            }
            --holding;
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(most.load(), kMax);
  EXPECT_EQ(table.KeyCount(), 0u);
}

TEST(LearnedLimits, BucketsAreBoundedAndGlobalBlocksPerUpstream) {
  LearnedLimits learned(32);
  for (int i = 0; i < 1000; ++i) learned.Check("api", "b" + std::to_string(i), 0);
  // Forgotten buckets start again as unknown (one request goes).
  EXPECT_EQ(learned.Check("api", "b0", 1), 0);
  algorithms::LearnedFacts global;
  global.limited = true;
  global.global = true;
  global.retry_after_ms = 700;
  learned.Learn("api", "b1", global, 100);
  EXPECT_EQ(learned.GlobalUntil("api"), 800);
  EXPECT_EQ(learned.Check("api", "any", 100), 700);
  EXPECT_EQ(learned.Check("other", "any", 100), 0);  // another upstream
}

}  // namespace
}  // namespace tollgate::store
