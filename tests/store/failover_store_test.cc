// The on_error decorators (store/failover_store.h) in front of a primary that
// fails on demand: each policy's answer, where it comes from, and what is
// counted.
#include "store/failover_store.h"

#include <gtest/gtest.h>

#include <memory>
#include <utility>
#include <vector>

#include "store_sinks.h"

namespace tollgate::store {
namespace {

// A primary store that answers with `status` inline, or later (Complete())
// when `hold` is set.
class FakeStore final : public Store {
 public:
  explicit FakeStore(int* destroyed = nullptr) : destroyed_(destroyed) {}
  ~FakeStore() override {
    // As RedisStore does: what is still pending fails when it goes.
    Complete(StoreStatus::kUnavailable);
    if (destroyed_ != nullptr) ++*destroyed_;
  }
  void Decide(const DecideRequest&, DecisionSink& sink) override {
    ++calls;
    if (hold) {
      pending.push_back(&sink);
      return;
    }
    Answer(status, sink);
  }
  // Answered as Decide() answers.
  void Settle(const SettleRequest& request, DecisionSink& sink) override {
    ++settles;
    Decide(request.reservation, sink);
  }
  std::string_view Kind() const override { return "fake"; }
  void Complete(StoreStatus with) {
    std::vector<DecisionSink*> now;
    now.swap(pending);
    for (DecisionSink* sink : now) Answer(with, *sink);
  }

  StoreStatus status = StoreStatus::kOk;
  bool hold = false;
  int calls = 0;
  int settles = 0;
  std::vector<DecisionSink*> pending;

 private:
  static void Answer(StoreStatus with, DecisionSink& sink) {
    StoreResult r;
    r.status = with;
    if (with == StoreStatus::kOk) {
      r.decision.allowed = true;
      r.decision.remaining = 42;
    }
    sink.OnDecision(r);
  }
  int* destroyed_;
};

struct Failure {
  StoreStatus status;
  FailurePolicy policy;
};

struct Counted final : FailureObserver {
  std::vector<Failure> failures;
  void OnStoreFailure(StoreStatus status, FailurePolicy policy) override {
    failures.push_back({status, policy});
  }
};

struct StoreCase {
  explicit StoreCase(FailurePolicy policy) {
    auto fake = std::make_unique<FakeStore>();
    primary = fake.get();
    store =
        std::make_unique<FailoverStore>(std::move(fake), local, policy, &counted, nullptr, &fleet);
  }
  StoreResult Decide(std::string_view key = "k") {
    Result r;
    store->Decide({key, &limit, 1, 1000, 0}, r);
    EXPECT_TRUE(r.done);
    return r.result;
  }
  // Settles `reserved` units reserved at 1000 (answered by `by`) to
  // `actual` at 1200.
  StoreResult Settle(std::int64_t reserved, std::int64_t actual, ResultSource by) {
    SettleRequest settle{{"k", &limit, reserved, 1000, 0}, actual, 1200};
    settle.reserved_by = by;
    Result r;
    store->Settle(settle, r);
    EXPECT_TRUE(r.done);
    return r.result;
  }
  LimitSpec limit = FixedWindow(2, 60'000);
  LocalStore local;
  Counted counted;
  FleetSize fleet;
  FakeStore* primary = nullptr;
  std::unique_ptr<FailoverStore> store;
};

TEST(FailoverStore, PassesThePrimarysAnswersOnUncounted) {
  for (const FailurePolicy policy :
       {FailurePolicy::kAllow, FailurePolicy::kDeny, FailurePolicy::kLocal}) {
    StoreCase c(policy);
    const StoreResult r = c.Decide();
    EXPECT_EQ(r.status, StoreStatus::kOk);
    EXPECT_EQ(r.source, ResultSource::kPrimary);
    EXPECT_TRUE(r.decision.allowed);
    EXPECT_EQ(r.decision.remaining, 42);
    EXPECT_TRUE(c.counted.failures.empty());
    EXPECT_EQ(c.store->Kind(), "fake");
  }
}

TEST(FailoverStore, LocalPolicyDecidesOnTheFallback) {
  StoreCase c(FailurePolicy::kLocal);
  c.primary->status = StoreStatus::kTimeout;
  for (int i = 0; i < 2; ++i) {
    const StoreResult r = c.Decide();
    EXPECT_EQ(r.status, StoreStatus::kOk);
    EXPECT_EQ(r.source, ResultSource::kFallback);
    EXPECT_TRUE(r.decision.allowed);
    EXPECT_EQ(r.decision.remaining, 1 - i);
  }
  // The fallback keeps the key's count: the third is limited, as it says.
  const StoreResult third = c.Decide();
  EXPECT_EQ(third.source, ResultSource::kFallback);
  EXPECT_FALSE(third.decision.allowed);
  EXPECT_EQ(c.local.DecideNow({"k", &c.limit, 1, 1000, 0}).allowed, false);
  ASSERT_EQ(c.counted.failures.size(), 3u);
  EXPECT_EQ(c.counted.failures[0].status, StoreStatus::kTimeout);
  EXPECT_EQ(c.counted.failures[0].policy, FailurePolicy::kLocal);
}

TEST(FailoverStore, SharePolicyDecidesTheFleetsShareOfEveryLimit) {
  StoreCase c(FailurePolicy::kShare);
  c.limit = FixedWindow(10, 60'000);
  c.fleet.Set(3);
  c.primary->status = StoreStatus::kUnavailable;
  int allowed = 0;
  for (int i = 0; i < 10; ++i) {
    const StoreResult r = c.Decide();
    EXPECT_EQ(r.status, StoreStatus::kOk);
    EXPECT_EQ(r.source, ResultSource::kFallback);
    allowed += r.decision.allowed ? 1 : 0;
  }
  EXPECT_EQ(allowed, 3);  // 10 / 3 gateways
  // The count changing during the outage changes nothing: the share stays
  // the one the outage began with, spent.
  c.fleet.Set(2);
  allowed = 0;
  for (int i = 0; i < 10; ++i) allowed += c.Decide().decision.allowed ? 1 : 0;
  EXPECT_EQ(allowed, 0);
  // Once the primary has answered, the next outage divides by the new count.
  c.primary->status = StoreStatus::kOk;
  EXPECT_EQ(c.Decide().source, ResultSource::kPrimary);
  c.primary->status = StoreStatus::kUnavailable;
  allowed = 0;
  for (int i = 0; i < 10; ++i) allowed += c.Decide().decision.allowed ? 1 : 0;
  EXPECT_EQ(allowed, 5);
  ASSERT_EQ(c.counted.failures.size(), 30u);
  EXPECT_EQ(c.counted.failures[0].policy, FailurePolicy::kShare);
}

TEST(FailoverStore, ARequestCostingMoreThanItsShareIsRefusedAsDenyRefuses) {
  StoreCase c(FailurePolicy::kShare);
  c.limit = FixedWindow(10, 60'000);
  c.fleet.Set(3);
  c.primary->status = StoreStatus::kTimeout;
  Result r;
  c.store->Decide({"k", &c.limit, 4, 1000, 0}, r);  // 4 > 10 / 3
  ASSERT_TRUE(r.done);
  EXPECT_EQ(r.result.status, StoreStatus::kTimeout);
  EXPECT_EQ(r.result.source, ResultSource::kPolicyDenied);
  EXPECT_FALSE(r.result.decision.allowed);
  EXPECT_EQ(r.result.decision.retry_after_ms, 1000);
}

TEST(FailoverStore, DecideFailedAnswersAsThePolicyWithoutThePrimary) {
  StoreCase c(FailurePolicy::kLocal);
  Result r;
  c.store->DecideFailed({"k", &c.limit, 1, 1000, 0}, StoreStatus::kUnavailable, r);
  ASSERT_TRUE(r.done);
  EXPECT_EQ(r.result.source, ResultSource::kFallback);
  EXPECT_TRUE(r.result.decision.allowed);
  EXPECT_EQ(c.primary->calls, 0);
  ASSERT_EQ(c.counted.failures.size(), 1u);
  EXPECT_EQ(c.counted.failures[0].status, StoreStatus::kUnavailable);
}

TEST(FailoverStoreSettle, APrimarysReservationSettlesOnThePrimaryAndAFailurePassesOn) {
  StoreCase c(FailurePolicy::kLocal);
  const StoreResult ok = c.Settle(2, 1, ResultSource::kPrimary);
  EXPECT_EQ(ok.status, StoreStatus::kOk);
  EXPECT_EQ(ok.source, ResultSource::kPrimary);
  EXPECT_EQ(ok.decision.remaining, 42);
  EXPECT_EQ(c.primary->settles, 1);
  // A failed settle is not moved to the fallback, which holds none of the
  // units, nor counted as a fallback taken.
  c.primary->status = StoreStatus::kTimeout;
  const StoreResult failed = c.Settle(2, 0, ResultSource::kPrimary);
  EXPECT_EQ(failed.status, StoreStatus::kTimeout);
  EXPECT_EQ(failed.source, ResultSource::kPrimary);
  EXPECT_TRUE(c.counted.failures.empty());
  EXPECT_EQ(c.local.KeyCount(), 0u);
}

TEST(FailoverStoreSettle, AFallbacksReservationSettlesOnTheFallbacksShare) {
  StoreCase c(FailurePolicy::kShare);
  c.limit = FixedWindow(10, 60'000);
  c.fleet.Set(2);
  c.primary->status = StoreStatus::kUnavailable;
  Result reserved;
  c.store->Decide({"k", &c.limit, 5, 1000, 0}, reserved);  // the whole share of 5
  ASSERT_EQ(reserved.result.source, ResultSource::kFallback);
  ASSERT_TRUE(reserved.result.decision.allowed);
  EXPECT_FALSE(c.Decide().decision.allowed);
  const StoreResult r = c.Settle(5, 2, ResultSource::kFallback);
  EXPECT_EQ(r.status, StoreStatus::kOk);
  EXPECT_EQ(r.source, ResultSource::kFallback);
  EXPECT_EQ(r.decision.remaining, 3);
  EXPECT_EQ(c.primary->settles, 0);
  // The refund is the share's: three more requests pass, then none.
  int allowed = 0;
  for (int i = 0; i < 5; ++i) allowed += c.Decide().decision.allowed ? 1 : 0;
  EXPECT_EQ(allowed, 3);
}

TEST(FailoverStoreSettle, APolicyAllowedReservationHeldNothingToSettle) {
  StoreCase c(FailurePolicy::kAllow);
  const StoreResult r = c.Settle(2, 7, ResultSource::kPolicyAllowed);
  EXPECT_EQ(r.status, StoreStatus::kOk);
  EXPECT_EQ(r.source, ResultSource::kPolicyAllowed);
  EXPECT_TRUE(r.decision.allowed);
  EXPECT_EQ(c.primary->settles, 0);
  EXPECT_EQ(c.local.KeyCount(), 0u);
}

TEST(FailoverStore, AShareDividesLimitsAndBurstsRoundingDownToAtLeastOne) {
  const LimitSpec bucket = TokenBucket(100, 1000, 50);
  const LimitSpec share = ShareOf(bucket, 3);
  EXPECT_EQ(share.windows[0].limit, 33);
  EXPECT_EQ(share.windows[0].burst, 16);
  EXPECT_NE(share.fingerprint, bucket.fingerprint);
  EXPECT_EQ(ShareOf(bucket, 1).fingerprint, bucket.fingerprint);
  const LimitSpec small = ShareOf(FixedWindow(2, 1000), 5);
  EXPECT_EQ(small.windows[0].limit, 1);
  const LimitSpec leaky =
      ShareOf(LimitSpec::Make({Window(algorithms::Algorithm::kLeakyBucket, 10, 1000, 0)}), 4);
  EXPECT_EQ(leaky.windows[0].limit, 2);
  EXPECT_EQ(leaky.windows[0].burst, 0);
  // A leaky bucket holds burst + 1: 12 over three gateways is 4 each.
  const LimitSpec deep =
      ShareOf(LimitSpec::Make({Window(algorithms::Algorithm::kLeakyBucket, 30, 1000, 11)}), 3);
  EXPECT_EQ(deep.windows[0].burst, 3);
  const LimitSpec two =
      ShareOf(LimitSpec::Make({Window(algorithms::Algorithm::kFixedWindow, 100, 1000),
                               Window(algorithms::Algorithm::kFixedWindow, 1000, 60'000)}),
              4);
  EXPECT_EQ(two.windows[0].limit, 25);
  EXPECT_EQ(two.windows[1].limit, 250);
}

TEST(FailoverStore, AllowPolicyAllowsWithTheLimitRemaining) {
  StoreCase c(FailurePolicy::kAllow);
  c.primary->status = StoreStatus::kUnavailable;
  const StoreResult r = c.Decide();
  EXPECT_EQ(r.status, StoreStatus::kUnavailable);
  EXPECT_EQ(r.source, ResultSource::kPolicyAllowed);
  EXPECT_TRUE(r.decision.allowed);
  EXPECT_EQ(r.decision.remaining, 2);
  ASSERT_EQ(c.counted.failures.size(), 1u);
  EXPECT_EQ(c.counted.failures[0].status, StoreStatus::kUnavailable);
  EXPECT_EQ(c.counted.failures[0].policy, FailurePolicy::kAllow);
  // Nothing was decided on the fallback.
  EXPECT_EQ(c.local.KeyCount(), 0u);
}

TEST(FailoverStore, DenyPolicyLimitsForASecond) {
  StoreCase c(FailurePolicy::kDeny);
  c.primary->status = StoreStatus::kError;
  const StoreResult r = c.Decide();
  EXPECT_EQ(r.status, StoreStatus::kError);
  EXPECT_EQ(r.source, ResultSource::kPolicyDenied);
  EXPECT_FALSE(r.decision.allowed);
  EXPECT_EQ(r.decision.retry_after_ms, 1000);
  ASSERT_EQ(c.counted.failures.size(), 1u);
  EXPECT_EQ(c.counted.failures[0].status, StoreStatus::kError);
  EXPECT_EQ(c.counted.failures[0].policy, FailurePolicy::kDeny);
  EXPECT_EQ(c.local.KeyCount(), 0u);
}

TEST(FailoverStore, LaterAnswersReachTheirOwnCallers) {
  StoreCase c(FailurePolicy::kLocal);
  c.primary->hold = true;
  Result a, b;
  const std::string key_a = "a", key_b = "b";
  c.store->Decide({key_a, &c.limit, 2, 1000, 0}, a);
  c.store->Decide({key_b, &c.limit, 1, 1000, 0}, b);
  EXPECT_FALSE(a.done);
  EXPECT_FALSE(b.done);
  c.primary->Complete(StoreStatus::kTimeout);
  ASSERT_TRUE(a.done);
  ASSERT_TRUE(b.done);
  // Each was decided again with its own key and cost.
  EXPECT_EQ(a.result.source, ResultSource::kFallback);
  EXPECT_EQ(a.result.decision.remaining, 0);
  EXPECT_EQ(b.result.decision.remaining, 1);
  EXPECT_EQ(c.counted.failures.size(), 2u);
}

TEST(FailoverStore, WhatThePrimaryFailsAsItGoesIsAnswered) {
  LocalStore local;
  Counted counted;
  int destroyed = 0;
  const LimitSpec limit = FixedWindow(2, 60'000);
  Result r;
  {
    auto fake = std::make_unique<FakeStore>(&destroyed);
    fake->hold = true;
    FailoverStore store(std::move(fake), local, FailurePolicy::kDeny, &counted);
    store.Decide({"k", &limit, 1, 1000, 0}, r);
    EXPECT_FALSE(r.done);
  }
  EXPECT_EQ(destroyed, 1);
  ASSERT_TRUE(r.done);
  EXPECT_EQ(r.result.source, ResultSource::kPolicyDenied);
  EXPECT_EQ(counted.failures.size(), 1u);
}

TEST(FailoverStore, NoObserverIsFine) {
  LocalStore local;
  auto fake = std::make_unique<FakeStore>();
  fake->status = StoreStatus::kTimeout;
  FailoverStore store(std::move(fake), local, FailurePolicy::kAllow, nullptr);
  const LimitSpec limit = FixedWindow(2, 60'000);
  Result r;
  store.Decide({"k", &limit, 1, 1000, 0}, r);
  ASSERT_TRUE(r.done);
  EXPECT_EQ(r.result.source, ResultSource::kPolicyAllowed);
}

// A primary coordinator that answers with `status` inline, or later.
class FakeCoordinator final : public Coordinator {
 public:
  void CheckLearned(std::string_view, std::string_view, std::int64_t, CountSink& sink) override {
    Answer(sink, 0);
  }
  void Learn(std::string_view, std::string_view, const algorithms::LearnedFacts&,
             std::int64_t) override {
    ++learned;
  }
  void AcquirePlace(std::string_view, std::int64_t, std::int64_t, InflightGuard&,
                    CountSink& sink) override {
    Answer(sink, 1);
  }
  void EnterQueue(std::string_view, std::int64_t, InflightGuard&, CountSink& sink) override {
    Answer(sink, 7);
  }
  void Complete(StoreStatus with) {
    std::vector<CountSink*> now;
    now.swap(pending);
    for (CountSink* sink : now) sink->OnCount({with, 0});
  }

  StoreStatus status = StoreStatus::kOk;
  bool hold = false;
  int learned = 0;
  std::vector<CountSink*> pending;

 private:
  void Answer(CountSink& sink, std::int64_t value) {
    if (hold) {
      pending.push_back(&sink);
      return;
    }
    sink.OnCount({status, status == StoreStatus::kOk ? value : 0});
  }
};

struct CoordinatorCase {
  explicit CoordinatorCase(FailurePolicy policy) {
    auto fake = std::make_unique<FakeCoordinator>();
    primary = fake.get();
    coordinator = std::make_unique<FailoverCoordinator>(std::move(fake), local, policy, &counted);
  }
  CountResult Place(InflightGuard& place) {
    Answer a;
    coordinator->AcquirePlace("key", 1, 1000, place, a);
    EXPECT_TRUE(a.done);
    return a.result;
  }
  LocalCoordinator local;
  Counted counted;
  FakeCoordinator* primary = nullptr;
  std::unique_ptr<FailoverCoordinator> coordinator;
};

algorithms::LearnedFacts Blocked() {
  algorithms::LearnedFacts facts;
  facts.limited = true;
  facts.global = true;
  facts.retry_after_ms = 5000;
  return facts;
}

TEST(FailoverCoordinator, PassesThePrimarysAnswersOnUncounted) {
  CoordinatorCase c(FailurePolicy::kLocal);
  InflightGuard place;
  const CountResult r = c.Place(place);
  EXPECT_EQ(r.status, StoreStatus::kOk);
  EXPECT_EQ(r.source, ResultSource::kPrimary);
  EXPECT_EQ(r.value, 1);
  EXPECT_EQ(c.local.places().Count("key"), 0);
  EXPECT_TRUE(c.counted.failures.empty());
}

TEST(FailoverCoordinator, LocalPolicyAsksTheProcesssCoordinator) {
  CoordinatorCase c(FailurePolicy::kLocal);
  c.primary->status = StoreStatus::kTimeout;
  InflightGuard first, second;
  const CountResult r = c.Place(first);
  EXPECT_EQ(r.status, StoreStatus::kOk);
  EXPECT_EQ(r.source, ResultSource::kFallback);
  EXPECT_EQ(r.value, 1);
  EXPECT_TRUE(first.held());
  EXPECT_EQ(c.local.places().Count("key"), 1);
  // max 1: the local place is taken.
  EXPECT_EQ(c.Place(second).value, 0);
  first.Release();
  EXPECT_EQ(c.local.places().Count("key"), 0);

  InflightGuard ticket;
  Answer queued;
  c.coordinator->EnterQueue("line", 1000, ticket, queued);
  ASSERT_TRUE(queued.done);
  EXPECT_EQ(queued.result.source, ResultSource::kFallback);
  EXPECT_EQ(queued.result.value, 0);
  EXPECT_EQ(c.local.queues().Count("line"), 1);

  // Learn teaches both; the local check then sees the block.
  c.coordinator->Learn("up", "b", Blocked(), 1000);
  EXPECT_EQ(c.primary->learned, 1);
  Answer checked;
  c.coordinator->CheckLearned("up", "b", 1000, checked);
  ASSERT_TRUE(checked.done);
  EXPECT_EQ(checked.result.status, StoreStatus::kOk);
  EXPECT_EQ(checked.result.source, ResultSource::kFallback);
  EXPECT_GT(checked.result.value, 0);

  ASSERT_EQ(c.counted.failures.size(), 4u);
  for (const Failure& f : c.counted.failures) {
    EXPECT_EQ(f.status, StoreStatus::kTimeout);
    EXPECT_EQ(f.policy, FailurePolicy::kLocal);
  }
}

TEST(FailoverCoordinator, AllowAndDenyAnswerWithoutTheFallback) {
  for (const FailurePolicy policy : {FailurePolicy::kAllow, FailurePolicy::kDeny}) {
    CoordinatorCase c(policy);
    c.primary->status = StoreStatus::kUnavailable;
    const ResultSource expected = policy == FailurePolicy::kAllow ? ResultSource::kPolicyAllowed
                                                                  : ResultSource::kPolicyDenied;
    InflightGuard place;
    const CountResult r = c.Place(place);
    EXPECT_EQ(r.status, StoreStatus::kUnavailable);
    EXPECT_EQ(r.source, expected);
    EXPECT_EQ(r.value, 0);
    EXPECT_FALSE(place.held());
    EXPECT_EQ(c.local.places().Count("key"), 0);
    Answer checked;
    c.coordinator->CheckLearned("up", "b", 1000, checked);
    ASSERT_TRUE(checked.done);
    EXPECT_EQ(checked.result.status, StoreStatus::kUnavailable);
    EXPECT_EQ(checked.result.source, expected);
    // Only the primary learns.
    c.coordinator->Learn("up", "b", Blocked(), 1000);
    EXPECT_EQ(c.primary->learned, 1);
    EXPECT_EQ(c.local.learned().Check("up", "b", 1000), 0);
    ASSERT_EQ(c.counted.failures.size(), 2u);
    EXPECT_EQ(c.counted.failures[1].policy, policy);
    EXPECT_EQ(c.counted.failures[1].status, StoreStatus::kUnavailable);
  }
}

TEST(FailoverCoordinator, CallsOutlivingTheDecoratorAnswerAsThePrimaryDid) {
  // A Redis coordinator's calls wait in its RedisStore, which outlives the
  // coordinator and its decorator.
  LocalCoordinator local;
  Counted counted;
  FakeCoordinator fake;  // stands for the store the calls wait in
  fake.hold = true;
  struct Forward final : Coordinator {
    explicit Forward(FakeCoordinator& f) : fake(f) {}
    void CheckLearned(std::string_view u, std::string_view b, std::int64_t now,
                      CountSink& sink) override {
      fake.CheckLearned(u, b, now, sink);
    }
    void Learn(std::string_view, std::string_view, const algorithms::LearnedFacts&,
               std::int64_t) override {}
    void AcquirePlace(std::string_view k, std::int64_t max, std::int64_t now, InflightGuard& p,
                      CountSink& sink) override {
      fake.AcquirePlace(k, max, now, p, sink);
    }
    void EnterQueue(std::string_view, std::int64_t, InflightGuard&, CountSink&) override {}
    FakeCoordinator& fake;
  };
  Answer a;
  InflightGuard place;
  {
    FailoverCoordinator coordinator(std::make_unique<Forward>(fake), local, FailurePolicy::kLocal,
                                    &counted);
    coordinator.AcquirePlace("key", 1, 1000, place, a);
    Answer done;
    coordinator.CheckLearned("up", "b", 1000, done);
    fake.Complete(StoreStatus::kTimeout);  // answered while the decorator lives
    ASSERT_TRUE(done.done);
    ASSERT_TRUE(a.done);
    a.done = false;
    coordinator.AcquirePlace("key", 1, 1000, place, a);
  }
  fake.Complete(StoreStatus::kUnavailable);
  ASSERT_TRUE(a.done);
  EXPECT_EQ(a.result.status, StoreStatus::kUnavailable);
  EXPECT_EQ(a.result.source, ResultSource::kPrimary);
  EXPECT_EQ(counted.failures.size(), 2u);
}

}  // namespace
}  // namespace tollgate::store
