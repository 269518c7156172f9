// LeasingStore (store/leasing_store.h) on a real redis-server, on a manual
// clock (Redis with time = "client"): requests answered from leases without
// waiting, sizes that follow a key's use, spent budgets not asked for again,
// unused units going back, several gateways never above the limit, a
// changed limit's leases dropped, a sliding_log's used slots at their
// admission times once their lease is back, and cold keys' takes sent
// together in one script call.
#include "store/leasing_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "leasing_fixture.h"
#include "store/failover_store.h"
#include "store/local_store.h"

namespace tollgate::store {
namespace {

TEST_F(LeasingStoreTest, ExactRulesGoToTheStoreBehind) {
  Gateway g(io_, redis_, clock_, stats_);
  const LimitSpec spec = FixedWindow(2, 60'000);
  EXPECT_TRUE(Decide(*g.leasing, "k", spec).decision.allowed);
  EXPECT_TRUE(Decide(*g.leasing, "k", spec).decision.allowed);
  EXPECT_FALSE(Decide(*g.leasing, "k", spec).decision.allowed);
  EXPECT_EQ(g.leasing->KeyCount(), 0u);
}

TEST_F(LeasingStoreTest, AColdKeyCostsOneCallPerDecision) {
  Gateway g(io_, redis_, clock_, stats_);
  const LimitSpec spec = Leased(TokenBucket(100, 1000, 100), 1000, 10);
  for (int i = 0; i < 5; ++i) {
    const std::uint64_t before = EvalshaCalls(redis_);
    bool at_once = true;
    const StoreResult r = Decide(*g.leasing, "cold", spec, &at_once);
    ASSERT_EQ(r.status, StoreStatus::kOk);
    EXPECT_TRUE(r.decision.allowed);
    EXPECT_FALSE(at_once);  // no units in hand: it waited for its take
    Settle();
    EXPECT_EQ(EvalshaCalls(redis_) - before, 1u) << i;  // one unit taken, spent at once
    // Spent with the take: nothing in hand, no lease kept in Redis (the
    // state is "level last next_id" alone), nothing to give back.
    EXPECT_EQ(g.leasing->UnitsInHand(), 0);
    const std::string key = redis_.Command({"KEYS", "*lease:{cold}*"});
    const std::string state = redis_.Command({"GET", key});
    EXPECT_EQ(std::count(state.begin(), state.end(), ' '), 2) << state;
    clock_.Advance(60'000);
    g.leasing->Tick();
    EXPECT_EQ(g.leasing->KeyCount(), 0u);
  }
  EXPECT_EQ(EvalshaCalls(redis_), 5u);  // no returns
  EXPECT_EQ(stats_.For("r").units[LeaseStats::kUnitsGranted].load(), 5u);
  EXPECT_EQ(stats_.For("r").units[LeaseStats::kUnitsUsed].load(), 5u);
}

// A cold key is forgotten as soon as its spent take is answered (no entry,
// no timer), and its use is remembered: back within a lease_ttl, it is
// sized by its rate as if it had been kept. Its second request is spent
// too, and then, at two units per lease_ttl, it is renewed in the
// background with a lease of two.
TEST_F(LeasingStoreTest, AForgottenColdKeyIsSizedByItsRecentUse) {
  Gateway g(io_, redis_, clock_, stats_);
  const LimitSpec spec = Leased(TokenBucket(100, 1000, 100), 1000, 10);
  ASSERT_TRUE(Decide(*g.leasing, "warm", spec).decision.allowed);
  Settle();
  EXPECT_EQ(g.leasing->KeyCount(), 0u);
  EXPECT_EQ(g.leasing->UnitsInHand(), 0);
  clock_.Advance(100);
  ASSERT_TRUE(Decide(*g.leasing, "warm", spec).decision.allowed);
  Settle();
  EXPECT_EQ(g.leasing->KeyCount(), 1u);
  EXPECT_EQ(g.leasing->UnitsInHand(), 2);
  EXPECT_EQ(stats_.For("r").units[LeaseStats::kUnitsGranted].load(), 4u);
}

// Cold keys whose requests arrive in one turn cost one script call
// between them, as exact decisions of a token bucket do; a bucket's and a
// window's, granted and refused.
TEST_F(LeasingStoreTest, ColdKeysArrivingTogetherShareOneCall) {
  Gateway first(io_, redis_, clock_, stats_);
  Gateway second(io_, redis_, clock_, stats_);
  for (const LimitSpec& limit : {TokenBucket(1, 86'400'000, 1), FixedWindow(1, 86'400'000)}) {
    const LimitSpec spec = Leased(limit, 1000, 10);
    for (Gateway* g : {&first, &second}) {
      const std::uint64_t before = EvalshaCalls(redis_);
      std::vector<std::string> keys;
      for (int i = 0; i < 20; ++i) keys.push_back("cold" + std::to_string(i));
      std::vector<Result> results(keys.size());
      for (std::size_t i = 0; i < keys.size(); ++i) {
        g->leasing->Decide({keys[i], &spec, 1, clock_.NowMs()}, results[i]);
      }
      for (Result& r : results) {
        while (!r.done) io_.run_one();
        ASSERT_EQ(r.result.status, StoreStatus::kOk);
        // Each key's one unit goes to the first gateway that asks.
        EXPECT_EQ(r.result.decision.allowed, g == &first);
      }
      Settle();
      EXPECT_EQ(EvalshaCalls(redis_) - before, 1u);
    }
  }
}

TEST_F(LeasingStoreTest, AHotKeyIsAnsweredFromTheHandAndRenewedInTheBackground) {
  Gateway g(io_, redis_, clock_, stats_);
  // 1000 per second, leases of at most 100, for a second.
  const LimitSpec spec = Leased(FixedWindow(1000, 1000), 1000, 100);
  clock_.Set(2'000'000);
  const std::uint64_t before = EvalshaCalls(redis_);
  int allowed = 0, waited = 0;
  // 1 request per ms for 900 ms.
  for (int ms = 0; ms < 900; ++ms) {
    bool at_once = false;
    const StoreResult r = Decide(*g.leasing, "hot", spec, &at_once);
    allowed += r.decision.allowed ? 1 : 0;
    waited += at_once ? 0 : 1;
    io_.poll();
    if (ms % 5 == 0) Settle();
    clock_.Advance(1);
  }
  EXPECT_EQ(allowed, 900);
  // Only while the first leases grow to the key's rate do requests wait.
  EXPECT_LE(waited, 10);
  // The leases grow to lease_max: about 900 / 100 takes, and a few small ones.
  EXPECT_LE(EvalshaCalls(redis_) - before, 30u);
}

// A cold key's request of cost 2 when the window has 1 unit left: its
// spent take is refused with the wait for 2 units (not for 1, which the
// window has), answered at once even when the reply comes late, and the
// key is not asked for again meanwhile.
TEST_F(LeasingStoreTest, ASpentTakeShortOfItsCostIsLimitedAfterOneCall) {
  Gateway first(io_, redis_, clock_, stats_);
  Gateway second(io_, redis_, clock_, stats_);
  const LimitSpec spec = Leased(FixedWindow(3, 3'600'000), 1000, 1);
  clock_.Set(7'200'000);  // a window starts
  ASSERT_TRUE(Decide(*second.leasing, "k", spec).decision.allowed);
  ASSERT_TRUE(Decide(*second.leasing, "k", spec).decision.allowed);
  Settle();
  const std::uint64_t before = EvalshaCalls(redis_);
  Result r;
  first.leasing->Decide({"k", &spec, 2, clock_.NowMs()}, r);
  clock_.Advance(5);  // the reply comes after the 1 ms the old answer named
  while (!r.done) io_.run_one();
  ASSERT_EQ(r.result.status, StoreStatus::kOk);
  EXPECT_FALSE(r.result.decision.allowed);
  // The window ends in an hour: not before lease_ttl.
  EXPECT_GE(r.result.decision.retry_after_ms, 900);
  Settle();
  EXPECT_EQ(EvalshaCalls(redis_) - before, 1u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_FALSE(Decide(*first.leasing, "k", spec, nullptr, 2).decision.allowed);
    clock_.Advance(50);
  }
  Settle();
  EXPECT_EQ(EvalshaCalls(redis_) - before, 1u);
}

TEST_F(LeasingStoreTest, ASpentBudgetIsNotAskedForAgainBeforeItsReset) {
  Gateway g(io_, redis_, clock_, stats_);
  const LimitSpec spec = Leased(FixedWindow(5, 10'000), 1000, 5);
  clock_.Set(3'000'000);  // a window starts
  int allowed = 0;
  for (int i = 0; i < 5; ++i) {
    allowed += Decide(*g.leasing, "k", spec).decision.allowed ? 1 : 0;
    Settle();
  }
  EXPECT_EQ(allowed, 5);
  const StoreResult limited = Decide(*g.leasing, "k", spec);
  EXPECT_FALSE(limited.decision.allowed);
  Settle();
  const std::uint64_t before = EvalshaCalls(redis_);
  int waited = 0;
  for (int i = 0; i < 100; ++i) {
    bool at_once = false;
    const StoreResult r = Decide(*g.leasing, "k", spec, &at_once);
    EXPECT_FALSE(r.decision.allowed);
    waited += at_once ? 0 : 1;
    EXPECT_GT(r.decision.retry_after_ms, 0);
    EXPECT_LE(r.decision.retry_after_ms, 10'000);
    clock_.Advance(50);
  }
  Settle();
  // A flood of limited requests costs Redis one call per lease_ttl (units
  // other gateways hold may come back within it), 5 s here.
  EXPECT_LE(EvalshaCalls(redis_) - before, 5u);
  EXPECT_LE(waited, 5);
  clock_.Set(3'010'000);  // the next window
  g.leasing->Tick();
  EXPECT_TRUE(Decide(*g.leasing, "k", spec).decision.allowed);
}

TEST_F(LeasingStoreTest, UnusedUnitsGoBackWhenTheLeaseEnds) {
  Gateway a(io_, redis_, clock_, stats_);
  Gateway b(io_, redis_, clock_, stats_);
  const LimitSpec spec = Leased(FixedWindow(20, 60'000), 1000, 10);
  clock_.Set(6'000'000);
  // `a` grows its lease on a burst, then goes quiet holding units.
  Burst(*a.leasing, "k", spec);
  const std::int64_t held = a.leasing->UnitsInHand();
  EXPECT_GT(held, 0);
  int b_allowed = 0;
  for (int i = 0; i < 20; ++i) {
    b_allowed += Decide(*b.leasing, "k", spec).decision.allowed ? 1 : 0;
    Settle();
  }
  EXPECT_EQ(b_allowed, 8 - held);  // what `a` holds is not `b`'s
  clock_.Advance(1000);
  a.leasing->Tick();  // a's leases end: their units go back
  Settle();
  EXPECT_EQ(a.leasing->UnitsInHand(), 0);
  b.leasing->Tick();  // b's refusal ends: at most lease_ttl
  for (int i = 0; i < 20; ++i) {
    b_allowed += Decide(*b.leasing, "k", spec).decision.allowed ? 1 : 0;
    Settle();
  }
  EXPECT_EQ(12 + b_allowed, 20);
}

// A lease cannot outlast its window: near a window's end every lease of a
// fixed window ends at that end, however early it is renewed. Renewing
// then gains nothing, and the gateway must not take lease after lease in
// the background until it holds the window's whole budget.
TEST_F(LeasingStoreTest, LeasesCutShortByTheWindowsEndAreNotRenewedInALoop) {
  constexpr std::int64_t kDayMs = 86'400'000;
  std::int64_t day = 20;
  for (const algorithms::Algorithm algorithm :
       {algorithms::Algorithm::kFixedWindow, algorithms::Algorithm::kTwoBucket,
        algorithms::Algorithm::kSubWindow}) {
    SCOPED_TRACE(std::string(algorithms::AlgorithmName(algorithm)));
    Gateway a(io_, redis_, clock_, stats_);
    Gateway b(io_, redis_, clock_, stats_);
    const LimitSpec spec = Leased(LimitSpec::Make({Window(algorithm, 300, kDayMs)}), 3'600'000, 30);
    clock_.Set(++day * kDayMs - 120'000);  // two minutes before a day ends
    for (int i = 0; i < 10; ++i) {
      ASSERT_TRUE(Decide(*a.leasing, "k", spec).decision.allowed) << i;
      Settle();
    }
    // `a` holds at most a lease_max beyond what its rate asks for.
    EXPECT_LE(a.leasing->UnitsInHand(), 30);
    int b_allowed = 0;
    for (int i = 0; i < 10; ++i) {
      b_allowed += Decide(*b.leasing, "k", spec).decision.allowed ? 1 : 0;
      Settle();
    }
    EXPECT_EQ(b_allowed, 10);
  }
}

TEST_F(LeasingStoreTest, GatewaysNeverAdmitMoreThanTheLimit) {
  std::vector<std::unique_ptr<Gateway>> gateways;
  for (int i = 0; i < 3; ++i)
    gateways.push_back(std::make_unique<Gateway>(io_, redis_, clock_, stats_));
  const LimitSpec specs[] = {Leased(FixedWindow(60, 1000), 300, 6),
                             Leased(TokenBucket(60, 1000, 60), 300, 6)};
  for (const LimitSpec& spec : specs) {
    clock_.Set(10'000'000);
    std::vector<std::int64_t> admitted;  // times
    for (int ms = 0; ms < 5000; ++ms) {
      // Each gateway gets a request every 10 ms: 300/s against 60/s.
      Gateway& g = *gateways[static_cast<std::size_t>(ms % 3)];
      if (ms % 10 < 3) {
        if (Decide(*g.leasing, "g", spec).decision.allowed) admitted.push_back(clock_.NowMs());
      }
      io_.poll();
      if (ms % 10 == 0) Settle();
      for (auto& x : gateways) x->leasing->Tick();
      clock_.Advance(1);
    }
    // No window of one second (fixed: aligned; bucket: any) holds more than
    // 60 (+ the burst of 60 for the bucket's first second).
    const bool bucket = &spec == &specs[1];
    for (std::size_t i = 0; i < admitted.size(); ++i) {
      std::size_t j = i;
      while (j < admitted.size() && admitted[j] < admitted[i] + 1000) ++j;
      if (!bucket && admitted[i] % 1000 != 0) continue;
      EXPECT_LE(static_cast<std::int64_t>(j - i), bucket ? 120 : 60) << admitted[i];
    }
    // Over the 5 s, at most the allowance (bucket: burst + rate * 5 s), and
    // at least 90% of it.
    const std::int64_t allowance = bucket ? 60 + 60 * 5 : 60 * 5;
    EXPECT_LE(static_cast<std::int64_t>(admitted.size()), allowance);
    EXPECT_GE(static_cast<std::int64_t>(admitted.size()) * 10, allowance * 9)
        << (bucket ? "token_bucket" : "fixed_window");
  }
}

TEST_F(LeasingStoreTest, AKilledGatewaysBucketUnitsComeBackAfterTheirHold) {
  auto a = std::make_unique<Gateway>(io_, redis_, clock_, stats_);
  Gateway b(io_, redis_, clock_, stats_);
  // 10 a second, a bucket of 10; leases of at most 10, for a second.
  const LimitSpec spec = Leased(TokenBucket(10, 1000, 10), 1000, 10);
  clock_.Set(14'000'000);
  // `a` is busy for a moment: it holds units when it dies.
  int a_allowed = 0;
  for (int i = 0; i < 4; ++i) {
    a_allowed += Decide(*a->leasing, "k", spec).decision.allowed ? 1 : 0;
    Settle();
  }
  const std::int64_t held = a->leasing->UnitsInHand();
  ASSERT_GT(held, 0);
  a.reset();  // as SIGKILL: nothing is given back
  int b_allowed = 0;
  for (int i = 0; i < 10; ++i) {
    b_allowed += Decide(*b.leasing, "k", spec).decision.allowed ? 1 : 0;
    Settle();
  }
  EXPECT_EQ(b_allowed, 10 - a_allowed - held);
  // Past the lease's hold (lease_ttl + the grace of 20 ms) its units count
  // as spent when it ended, and the bucket refills from there: a second
  // later it is full again.
  clock_.Advance(1000 + 20 + 1000);
  b.leasing->Tick();
  Settle();
  b_allowed = 0;
  for (int i = 0; i < 12; ++i) {
    b_allowed += Decide(*b.leasing, "k", spec).decision.allowed ? 1 : 0;
    Settle();
  }
  EXPECT_EQ(b_allowed, 10);
}

TEST_F(LeasingStoreTest, ATakeRedisCannotAnswerIsAnsweredByTheOnErrorPolicy) {
  RedisHealth health;
  RedisOptions o;
  std::string error;
  o.address = *ParseRedisUrl(redis_.url(), error);
  o.timeout_ms = 1000;
  o.time = RedisTime::kClient;
  auto redis = std::make_unique<RedisStore>(io_, o, health);
  RedisStore& raw = *redis;
  LocalStore local;
  auto failover =
      std::make_unique<FailoverStore>(std::move(redis), local, FailurePolicy::kDeny, nullptr);
  FailoverStore& policy = *failover;
  LeasingStore leasing(io_, std::move(failover), &policy, raw, clock_, stats_,
                       LeasingStore::Options{});
  const LimitSpec spec = Leased(FixedWindow(10, 60'000), 1000, 5);
  redis_.Kill();
  for (int i = 0; i < 3; ++i) {
    // The first waits for its take, which fails; the next ones, within the
    // backoff, are answered at once without another.
    bool at_once = false;
    const StoreResult r = Decide(leasing, "k", spec, &at_once);
    EXPECT_NE(r.status, StoreStatus::kOk) << i;
    EXPECT_EQ(r.source, ResultSource::kPolicyDenied) << i;
    EXPECT_FALSE(r.decision.allowed) << i;
    if (i > 0) {
      EXPECT_TRUE(at_once) << i;
    }
  }
  EXPECT_EQ(stats_.For("r").requests[LeaseStats::kFailed].load(), 1u);
}

TEST_F(LeasingStoreTest, ADrainingGatewayGivesItsUnitsBackAtOnce) {
  Gateway a(io_, redis_, clock_, stats_);
  Gateway b(io_, redis_, clock_, stats_);
  const LimitSpec spec = Leased(FixedWindow(20, 60'000), 1000, 10);
  clock_.Set(16'000'000);
  Burst(*a.leasing, "k", spec);
  ASSERT_GT(a.leasing->UnitsInHand(), 0);
  a.leasing->Drain();
  Settle();
  EXPECT_EQ(a.leasing->UnitsInHand(), 0);
  // `b` gets all the rest of the window without waiting for a's lease_ttl.
  int b_allowed = 0;
  for (int i = 0; i < 20; ++i) {
    b_allowed += Decide(*b.leasing, "k", spec).decision.allowed ? 1 : 0;
    Settle();
  }
  EXPECT_EQ(b_allowed, 8);
}

TEST_F(LeasingStoreTest, AChangedLimitDropsTheOldLeases) {
  Gateway g(io_, redis_, clock_, stats_);
  const LimitSpec old_spec = Leased(FixedWindow(100, 60'000), 1000, 10);
  const LimitSpec new_spec = Leased(FixedWindow(3, 60'000), 1000, 10);
  clock_.Set(12'000'000);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(Decide(*g.leasing, "k", old_spec).decision.allowed);
    Settle();
  }
  EXPECT_GT(g.leasing->UnitsInHand(), 0);
  // The reloaded rule: its own budget, none of the old limit's units.
  int allowed = 0;
  for (int i = 0; i < 10; ++i) {
    allowed += Decide(*g.leasing, "k", new_spec).decision.allowed ? 1 : 0;
    Settle();
  }
  EXPECT_EQ(allowed, 3);
  clock_.Advance(1000);
  g.leasing->Tick();
  Settle();
  EXPECT_EQ(g.leasing->UnitsInHand(), 0);  // the old leases went back
}

// A busy key's sliding_log leases go back with the times their units were
// admitted, and the log holds them there, not at the lease's stamp (take +
// lease_ttl + grace): a window after the burst, the key has its whole
// limit again.
TEST_F(LeasingStoreTest, ASlidingLogHoldsUsedUnitsAtTheirAdmissionTimes) {
  Gateway g(io_, redis_, clock_, stats_);
  const LimitSpec spec =
      Leased(LimitSpec::Make({Window(algorithms::Algorithm::kSlidingLog, 10, 10'000)}), 1000, 10);
  clock_.Set(18'000'000);
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    for (int i = 0; i < 10; ++i) {
      EXPECT_TRUE(Decide(*g.leasing, "k", spec).decision.allowed) << i;
      Settle();
      clock_.Advance(1);
    }
    EXPECT_FALSE(Decide(*g.leasing, "k", spec).decision.allowed);
    Settle();
    EXPECT_EQ(g.leasing->UnitsInHand(), 0);
    // The last admission, 10 ms ago, leaves the window a window after it;
    // the stamps would stay a lease_ttl longer.
    clock_.Advance(10'000 - 10);
    g.leasing->Tick();
    Settle();
  }
}

}  // namespace
}  // namespace tollgate::store
