#include "store/recent_use.h"

#include <gtest/gtest.h>

namespace tollgate::store {
namespace {

TEST(RecentUse, GivesBackWhatWasPutUnderTheSameHash) {
  RecentUse recent(4);
  EXPECT_FALSE(recent.Find(7, 1000).has_value());
  const std::int64_t now = 5'000'000'000'123;  // past 2^32 ms: times kept modulo
  recent.Put(7, {now - 1500, 3, 9, now - 20});
  const auto use = recent.Find(7, now);
  ASSERT_TRUE(use.has_value());
  EXPECT_EQ(use->period_start, now - 1500);
  EXPECT_EQ(use->used_now, 3);
  EXPECT_EQ(use->used_before, 9);
  EXPECT_EQ(use->last_use, now - 20);
}

TEST(RecentUse, AnotherKeyInTheSlotMakesTheFirstNewAgain) {
  RecentUse recent(4);
  const std::uint64_t a = 0x1'0000'0001, b = 0x2'0000'0001;  // same slot, other tags
  recent.Put(a, {0, 1, 0, 0});
  recent.Put(b, {0, 2, 0, 0});
  EXPECT_FALSE(recent.Find(a, 10).has_value());
  ASSERT_TRUE(recent.Find(b, 10).has_value());
  EXPECT_EQ(recent.Find(b, 10)->used_now, 2);
}

TEST(RecentUse, CountsSaturate) {
  RecentUse recent(1);
  recent.Put(1, {0, 1'000'000, -5, 0});
  EXPECT_EQ(recent.Find(1, 0)->used_now, 0xffff);
  EXPECT_EQ(recent.Find(1, 0)->used_before, 0);
}

}  // namespace
}  // namespace tollgate::store
