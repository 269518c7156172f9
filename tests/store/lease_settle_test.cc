// Settling reservations with sync = "lease" (LeasingStore::Settle,
// docs/leases.md "Settling") on a real redis-server and a manual clock: a
// refund goes back into the hand and, unused, to Redis when the lease
// ends or to the window in Redis; a charge is spent from the hand, and
// what the hand lacks counts in the window in Redis, or is a bucket's debt
// that the next take pays, so that the gateways together never admit more
// than the limit; an exact rule settles on the store behind.
#include <gtest/gtest.h>

#include "leasing_fixture.h"

namespace tollgate::store {
namespace {

class LeaseSettleTest : public LeasingStoreTest {
 protected:
  // Settles a reservation of `reserved` units made at `reserved_at`, now;
  // `inline_answer` tells whether the answer came before Settle returned.
  StoreResult SettleNow(LeasingStore& store, std::string_view key, const LimitSpec& spec,
                        std::int64_t reserved_at, std::int64_t reserved, std::int64_t actual,
                        bool* inline_answer = nullptr) {
    Result r;
    store.Settle({{key, &spec, reserved, reserved_at}, actual, clock_.NowMs()}, r);
    if (inline_answer != nullptr) *inline_answer = r.done;
    while (!r.done) io_.run_one();
    return r.result;
  }
  // From `start_ms` on, `g` grows its leases of `key` on a burst of 12
  // requests: the units it then holds.
  std::int64_t Warm(Gateway& g, const LimitSpec& spec, std::int64_t start_ms) {
    clock_.Set(start_ms);
    Burst(*g.leasing, "k", spec);
    return g.leasing->UnitsInHand();
  }
  // From `start_ms` on, a cold key's reservation of `cost` units: its take
  // is spent at once, and no lease in hand holds them. When it was made.
  std::int64_t ReserveCold(Gateway& g, const LimitSpec& spec, std::int64_t start_ms,
                           std::int64_t cost) {
    clock_.Set(start_ms);
    const std::int64_t at = clock_.NowMs();
    EXPECT_TRUE(Decide(*g.leasing, "k", spec, nullptr, cost).decision.allowed);
    Settle();
    return at;
  }
  // A lease_ttl (1 s) later: `g`'s leases have ended and gone back.
  void EndLeases(Gateway& g) {
    clock_.Advance(1000);
    g.leasing->Tick();
    Settle();
    EXPECT_EQ(g.leasing->UnitsInHand(), 0);
  }
  // Requests of one unit from `g` until `tries` were made: how many passed.
  int Admitted(Gateway& g, std::string_view key, const LimitSpec& spec, int tries) {
    int allowed = 0;
    for (int i = 0; i < tries; ++i) {
      allowed += Decide(*g.leasing, key, spec).decision.allowed ? 1 : 0;
      Settle();
    }
    return allowed;
  }
};

TEST_F(LeaseSettleTest, ExactRulesSettleOnTheStoreBehind) {
  Gateway g(io_, redis_, clock_, stats_);
  const LimitSpec spec = FixedWindow(3, 60'000);
  clock_.Set(60'000'000);
  const std::int64_t at = clock_.NowMs();
  ASSERT_TRUE(Decide(*g.leasing, "k", spec, nullptr, 3).decision.allowed);
  const StoreResult r = SettleNow(*g.leasing, "k", spec, at, 3, 1);
  ASSERT_EQ(r.status, StoreStatus::kOk);
  EXPECT_EQ(r.decision.remaining, 2);
  EXPECT_EQ(Admitted(g, "k", spec, 5), 2);
}

TEST_F(LeaseSettleTest, ARefundGoesBackIntoTheHandAndToRedisWhenTheLeaseEnds) {
  Gateway a(io_, redis_, clock_, stats_);
  Gateway b(io_, redis_, clock_, stats_);
  const LimitSpec spec = Leased(FixedWindow(40, 60'000), 1000, 10);
  clock_.Set(6'000'000);         // a window starts
  Burst(*a.leasing, "k", spec);  // 12 admitted; `a` holds units
  const std::int64_t held = a.leasing->UnitsInHand();
  ASSERT_GE(held, 3);
  const std::int64_t at = clock_.NowMs();
  ASSERT_TRUE(Decide(*a.leasing, "k", spec, nullptr, 3).decision.allowed);
  EXPECT_EQ(a.leasing->UnitsInHand(), held - 3);
  clock_.Advance(10);
  const std::uint64_t before = EvalshaCalls(redis_);
  bool at_once = false;
  const StoreResult r = SettleNow(*a.leasing, "k", spec, at, 3, 1, &at_once);
  EXPECT_TRUE(at_once);
  ASSERT_EQ(r.status, StoreStatus::kOk);
  EXPECT_EQ(r.decision.remaining, held - 1);
  EXPECT_EQ(a.leasing->UnitsInHand(), held - 1);
  Settle();
  EXPECT_EQ(EvalshaCalls(redis_), before);  // settled without Redis
  // The leases end: their unused units, the refund's too, go back, and
  // the window has 40 - 12 - 1 units for `b`.
  EndLeases(a);
  EXPECT_EQ(Admitted(b, "k", spec, 40), 27);
}

TEST_F(LeaseSettleTest, AQuietKeysRefundGoesBackToTheWindowInRedis) {
  Gateway a(io_, redis_, clock_, stats_);
  Gateway b(io_, redis_, clock_, stats_);
  const LimitSpec spec = Leased(FixedWindow(10, 60'000), 1000, 5);
  // A lease taken after the reservation, for the key's rate, holds none of
  // its units.
  const std::int64_t at = ReserveCold(a, spec, 30'000'000, 4);
  clock_.Advance(10);
  ASSERT_EQ(SettleNow(*a.leasing, "k", spec, at, 4, 1).status, StoreStatus::kOk);
  Settle();
  EndLeases(a);
  // The window counts the one unit used: 9 are left for `b`.
  EXPECT_EQ(Admitted(b, "k", spec, 20), 9);
}

TEST_F(LeaseSettleTest, AChargeIsSpentFromTheHand) {
  Gateway a(io_, redis_, clock_, stats_);
  const LimitSpec spec = Leased(FixedWindow(40, 60'000), 1000, 10);
  const std::int64_t held = Warm(a, spec, 12'000'000);
  ASSERT_GE(held, 3);
  const std::int64_t at = clock_.NowMs();
  ASSERT_TRUE(Decide(*a.leasing, "k", spec).decision.allowed);
  bool at_once = false;
  const StoreResult r = SettleNow(*a.leasing, "k", spec, at, 1, 3, &at_once);
  EXPECT_TRUE(at_once);
  ASSERT_EQ(r.status, StoreStatus::kOk);
  EXPECT_EQ(a.leasing->UnitsInHand(), held - 3);
}

// The part of a charge beyond the hand: a window's count in Redis, or a
// bucket's debt in the hand that the next take pays. Either way the
// gateways together admit the limit's 10 units: `a` 4, `b` 6.
TEST_F(LeaseSettleTest, AChargeBeyondTheHandIsTakenFromTheSharedBudget) {
  std::int64_t start = 18'000'000;
  for (const LimitSpec& limit : {FixedWindow(10, 3'600'000), TokenBucket(10, 3'600'000, 10)}) {
    SCOPED_TRACE(std::string(algorithms::AlgorithmName(limit.windows[0].algorithm)));
    Gateway a(io_, redis_, clock_, stats_);
    Gateway b(io_, redis_, clock_, stats_);
    const LimitSpec spec = Leased(limit, 1000, 5);
    start += 3'600'000;  // a window starts
    const std::int64_t at = ReserveCold(a, spec, start, 1);
    ASSERT_EQ(a.leasing->UnitsInHand(), 0);
    const StoreResult r = SettleNow(*a.leasing, "k", spec, at, 1, 4);
    ASSERT_EQ(r.status, StoreStatus::kOk);
    EXPECT_EQ(r.decision.remaining, 0);
    Settle();  // the bucket's take that pays its three units of debt
    EndLeases(a);
    EXPECT_EQ(Admitted(b, "k", spec, 20), 6);
  }
}

// A charge above a window's limit counts until the window ends, as the
// exact store's does: the next window is whole.
TEST_F(LeaseSettleTest, AWindowsChargeAboveItsLimitEndsWithTheWindow) {
  Gateway a(io_, redis_, clock_, stats_);
  const LimitSpec spec = Leased(FixedWindow(4, 60'000), 1000, 4);
  const std::int64_t at = ReserveCold(a, spec, 24'000'000, 4);
  ASSERT_EQ(SettleNow(*a.leasing, "k", spec, at, 4, 7).status, StoreStatus::kOk);
  Settle();
  EXPECT_EQ(Admitted(a, "k", spec, 5), 0);
  clock_.Set(24'060'000);
  a.leasing->Tick();
  Settle();
  EXPECT_EQ(Admitted(a, "k", spec, 10), 4);
}

// A bucket's debt that the budget cannot pay yet keeps the key limited
// until the bucket has refilled it.
TEST_F(LeaseSettleTest, ABucketsDebtIsWaitedOff) {
  Gateway a(io_, redis_, clock_, stats_);
  // A token a second, at most 4.
  const LimitSpec spec = Leased(TokenBucket(1, 1000, 4), 1000, 4);
  const std::int64_t at = ReserveCold(a, spec, 48'000'000, 4);
  ASSERT_EQ(SettleNow(*a.leasing, "k", spec, at, 4, 7).status, StoreStatus::kOk);
  Settle();
  EXPECT_EQ(Admitted(a, "k", spec, 5), 0);
  // Three seconds refill the three units of debt, the fourth one more.
  int allowed = 0;
  for (int s = 0; s < 4; ++s) {
    clock_.Advance(1000);
    a.leasing->Tick();
    Settle();
    allowed += Admitted(a, "k", spec, 3);
  }
  EXPECT_EQ(allowed, 1);
}

}  // namespace
}  // namespace tollgate::store
