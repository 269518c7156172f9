// Phase admit's pure part (gateway/core/limits.h), without I/O: which rules
// StartLimits asks the store about, what FinishLimits makes of the answers
// (the verdict, the rule shown in the headers, the access log's words),
// and DelayFor's estimate. The store is a fake that answers what the test
// says, inline or later.
#include "gateway/core/limits.h"

#include <gtest/gtest.h>

#include <deque>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "rules/config.h"
#include "base/clock.h"
#include "test_support.h"

namespace tollgate::gateway {
namespace {

// Answers each Decide with the next programmed result, at once or when
// the test calls Complete().
class FakeStore final : public store::Store {
 public:
  enum class Timing { kInline, kLater };
  explicit FakeStore(Timing timing = Timing::kInline) : timing_(timing) {}
  void Answer(store::StoreResult result) { answers_.push_back(result); }
  void Decide(const store::DecideRequest& request, store::DecisionSink& sink) override {
    keys_.emplace_back(request.key);
    key_hashes_.push_back(request.key_hash);
    store::StoreResult result = answers_.front();
    answers_.pop_front();
    if (timing_ == Timing::kInline) {
      sink.OnDecision(result);
    } else {
      later_.push_back({&sink, result});
    }
  }
  // The limits never settle.
  void Settle(const store::SettleRequest&, store::DecisionSink& sink) override {
    ADD_FAILURE() << "settled";
    sink.OnDecision({store::StoreStatus::kError, store::ResultSource::kPrimary, {}});
  }
  std::string_view Kind() const override { return "fake"; }
  void Complete() {
    for (auto& [sink, result] : later_) sink->OnDecision(result);
    later_.clear();
  }
  const std::vector<std::string>& keys() const { return keys_; }
  const std::vector<std::uint64_t>& key_hashes() const { return key_hashes_; }

 private:
  Timing timing_;
  std::deque<store::StoreResult> answers_;
  std::vector<std::pair<store::DecisionSink*, store::StoreResult>> later_;
  std::vector<std::string> keys_;
  std::vector<std::uint64_t> key_hashes_;
};

store::StoreResult Allowed(std::int64_t remaining, std::int64_t delay_ms = 0) {
  store::StoreResult r;
  r.decision.allowed = true;
  r.decision.remaining = remaining;
  r.decision.delay_ms = delay_ms;
  return r;
}

store::StoreResult Refused(std::int64_t retry_after_ms) {
  store::StoreResult r;
  r.decision.allowed = false;
  r.decision.retry_after_ms = retry_after_ms;
  return r;
}

store::StoreResult Failed(store::ResultSource source, bool allowed) {
  store::StoreResult r;
  r.status = store::StoreStatus::kUnavailable;
  r.source = source;
  r.decision.allowed = allowed;
  return r;
}

class CountingWaker final : public BatchWaker {
 public:
  void Wake() override { ++woken; }
  int woken = 0;
};

// A configuration's rules, identity and a request from 192.0.2.1.
class Limits : public ::testing::Test {
 protected:
  void Load(const std::string& rules) {
    loaded_ =
        rules::LoadConfigText(testing::WithEchoPort(testing::BasicConfig(rules), 9), "t.toml");
    ASSERT_TRUE(loaded_.config) << loaded_.errors[0].ToString();
    std::string error;
    resolver_ = rules::IdentityResolver::Create(loaded_.config->identity, clock_, error);
    ASSERT_TRUE(resolver_) << error;
    rule_set_ = std::make_unique<rules::RuleSet>(loaded_.config->rules);
    facts_.method = "GET";
    facts_.path = "/api";
    facts_.host = "example.com";
    facts_.route = "all";
    facts_.peer = *rules::IpAddress::Parse("192.0.2.1");
    facts_.headers = &headers_;
    identity_ = resolver_->Resolve(facts_);
  }

  LimitContext Context(store::Store& store) {
    return LimitContext{*resolver_, *rule_set_, store, clock_.NowMs(), clock_.NowMs()};
  }

  // Runs StartLimits and, when the store was asked, FinishLimits.
  LimitOutcome Decide(store::Store& store) {
    const LimitContext context = Context(store);
    LimitOutcome outcome;
    if (StartLimits(context, facts_, identity_, evaluation_, hits_, batch_, outcome) ==
        LimitStart::kStarted) {
      EXPECT_TRUE(batch_.done());
      FinishLimits(context, hits_, batch_, outcome);
    }
    return outcome;
  }

  const rules::RuleConfig& rule(std::size_t i) const { return loaded_.config->rules[i]; }

  struct NoHeaders final : rules::HeaderLookup {
    std::string_view Get(std::string_view) const override { return {}; }
    std::string GetJoined(std::string_view) const override { return {}; }
  };

  store::ManualClock clock_{1'000'000};
  rules::LoadResult loaded_;
  std::unique_ptr<rules::IdentityResolver> resolver_;
  std::unique_ptr<rules::RuleSet> rule_set_;
  NoHeaders headers_;
  rules::RequestFacts facts_;
  rules::Identity identity_;
  rules::Evaluation evaluation_;
  std::vector<const rules::RuleHit*> hits_;
  DecisionBatch batch_;
};

constexpr const char* kTwoRules = R"(
[[rules]]
name = "per-ip"
key = "ip"
algorithm = "fixed_window"
limit = 10
window = "1m"

[[rules]]
name = "global"
key = "global"
algorithm = "token_bucket"
limit = 100
window = "1s"
)";

TEST_F(Limits, AllowedByEveryRuleShowsTheRuleClosestToItsLimit) {
  Load(kTwoRules);
  FakeStore store;
  store.Answer(Allowed(7));
  store.Answer(Allowed(3));
  const LimitOutcome outcome = Decide(store);
  EXPECT_EQ(outcome.verdict, Verdict::kForward);
  EXPECT_EQ(outcome.shown, &rule(1));
  EXPECT_EQ(outcome.shown_decision.remaining, 3);
  EXPECT_EQ(outcome.log, "per-ip:allowed,global:allowed");
  ASSERT_EQ(store.keys().size(), 2u);
}

TEST_F(Limits, TheLimitingRuleWithTheLongestWaitSpeaks) {
  Load(kTwoRules);
  FakeStore store;
  store.Answer(Refused(500));
  store.Answer(Refused(2000));
  const LimitOutcome outcome = Decide(store);
  EXPECT_EQ(outcome.verdict, Verdict::kReject);
  EXPECT_EQ(outcome.shown, &rule(1));
  EXPECT_EQ(outcome.shown_decision.retry_after_ms, 2000);
  EXPECT_EQ(outcome.log, "per-ip:limited,global:limited");
}

TEST_F(Limits, DryRunLimitsNothingAndShapingDelays) {
  Load(R"(
[[rules]]
name = "trial"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1m"
action = "dry_run"

[[rules]]
name = "shaped"
key = "ip"
algorithm = "leaky_bucket"
limit = 10
window = "1s"
burst = 5
)");
  FakeStore store;
  store.Answer(Refused(100));
  store.Answer(Allowed(4, 250));
  const LimitOutcome outcome = Decide(store);
  EXPECT_EQ(outcome.verdict, Verdict::kForward);
  EXPECT_EQ(outcome.delay_ms, 250);
  EXPECT_EQ(outcome.log, "trial:dry_run,shaped:allowed");
}

TEST_F(Limits, ADelayRuleThatLimitsMakesTheRequestWait) {
  Load(R"(
[[rules]]
name = "queue"
key = "ip"
algorithm = "fixed_window"
limit = 5
window = "1s"
action = "delay"
max_delay = "5s"
)");
  FakeStore store;
  store.Answer(Refused(300));
  const LimitOutcome outcome = Decide(store);
  EXPECT_EQ(outcome.verdict, Verdict::kDelay);
  ASSERT_EQ(outcome.delayed.size(), 1u);
  EXPECT_EQ(outcome.delayed[0].decision.retry_after_ms, 300);
  EXPECT_EQ(outcome.log, "queue:delayed");
}

TEST_F(Limits, WhatTheStoreCouldNotDecideFollowsThePolicy) {
  Load(kTwoRules);
  FakeStore allowing;
  allowing.Answer(Failed(store::ResultSource::kPolicyAllowed, true));
  allowing.Answer(Allowed(50));
  LimitOutcome outcome = Decide(allowing);
  EXPECT_EQ(outcome.verdict, Verdict::kForward);
  EXPECT_EQ(outcome.log, "per-ip:error,global:allowed");

  FakeStore denying;
  denying.Answer(Failed(store::ResultSource::kPolicyDenied, false));
  denying.Answer(Refused(10));
  outcome = Decide(denying);
  EXPECT_EQ(outcome.verdict, Verdict::kStoreUnavailable);
  EXPECT_EQ(outcome.shown, &rule(0));

  FakeStore fallback;
  store::StoreResult local = Allowed(9);
  local.source = store::ResultSource::kFallback;
  fallback.Answer(local);
  fallback.Answer(Allowed(99));
  outcome = Decide(fallback);
  EXPECT_EQ(outcome.verdict, Verdict::kForward);
  EXPECT_EQ(outcome.log, "per-ip:allowed(local),global:allowed");
}

TEST_F(Limits, AnExemptRuleNeedsNoStore) {
  Load(R"(
[[rules]]
name = "health"
match = { path_prefix = "/api" }
exempt = true
)" + std::string(kTwoRules));
  FakeStore store;
  const LimitOutcome outcome = Decide(store);
  EXPECT_EQ(outcome.verdict, Verdict::kForward);
  EXPECT_EQ(outcome.log, "health:exempt");
  EXPECT_TRUE(store.keys().empty());
}

TEST_F(Limits, ABatchAnsweredLaterWakesItsWaiterOnce) {
  Load(kTwoRules);
  FakeStore store(FakeStore::Timing::kLater);
  store.Answer(Allowed(1));
  store.Answer(Allowed(2));
  CountingWaker waker;
  batch_.set_waker(&waker);
  const LimitContext context = Context(store);
  LimitOutcome outcome;
  ASSERT_EQ(StartLimits(context, facts_, identity_, evaluation_, hits_, batch_, outcome),
            LimitStart::kStarted);
  EXPECT_FALSE(batch_.done());
  EXPECT_EQ(waker.woken, 0);
  store.Complete();
  EXPECT_TRUE(batch_.done());
  EXPECT_EQ(waker.woken, 1);
  FinishLimits(context, hits_, batch_, outcome);
  EXPECT_EQ(outcome.shown_decision.remaining, 1);
}

// A caller that decides the same hits many times (a WebSocket tunnel's
// messages) hands their key hashes on; a hit with an override is decided
// under the override's key, which the store hashes itself; and a batch
// started again keeps nothing of the last one's override.
TEST_F(Limits, KeyHashesPassOnExceptForAnOverriddenHitAndAReusedBatchForgetsIt) {
  Load(kTwoRules);
  rule_set_->Evaluate(facts_, identity_, evaluation_);
  ASSERT_EQ(evaluation_.hits.size(), 2u);
  for (const rules::RuleHit& hit : evaluation_.hits) hits_.push_back(&hit);
  const std::vector<std::uint64_t> hashes{store::KeyHash(hits_[0]->key),
                                          store::KeyHash(hits_[1]->key)};
  FakeStore store;
  for (int i = 0; i < 4; ++i) store.Answer(Allowed(1));

  OverrideTable overrides;
  OverrideSet::Entry entry;
  entry.rule_index = 0;
  entry.key = hits_[0]->key;
  entry.applied.rule = std::make_shared<const rules::RuleConfig>(rule(0));
  entry.applied.store_key = "override:" + hits_[0]->key;
  entry.applied.expires_unix_ms = std::numeric_limits<std::int64_t>::max();
  std::vector<OverrideSet::Entry> entries;
  entries.push_back(std::move(entry));
  overrides.Set(std::make_shared<const OverrideSet>(loaded_.config->rules, std::move(entries)));
  LimitContext context = Context(store);
  context.overrides = &overrides;
  batch_.Start(context, hits_, 0, hashes);
  ASSERT_TRUE(batch_.done());
  EXPECT_NE(batch_.overridden(0), nullptr);
  EXPECT_EQ(store.keys()[0], "override:" + hits_[0]->key);
  EXPECT_EQ(store.key_hashes()[0], 0u);
  EXPECT_EQ(store.key_hashes()[1], hashes[1]);

  overrides.Set(std::make_shared<const OverrideSet>(loaded_.config->rules,
                                                    std::vector<OverrideSet::Entry>{}));
  batch_.Start(context, hits_, 0, hashes);
  ASSERT_TRUE(batch_.done());
  EXPECT_EQ(batch_.overridden(0), nullptr);
  EXPECT_EQ(store.keys()[2], hits_[0]->key);
  EXPECT_EQ(store.key_hashes()[2], hashes[0]);
  EXPECT_EQ(store.key_hashes()[3], hashes[1]);
}

TEST_F(Limits, DelayForSpreadsAFixedWindowQueueOverTheNextWindows) {
  Load(R"(
[[rules]]
name = "queue"
key = "ip"
algorithm = "fixed_window"
limit = 5
window = "1s"
action = "delay"
max_delay = "10s"

[[rules]]
name = "bucket"
key = "ip"
algorithm = "token_bucket"
limit = 5
window = "1s"
action = "delay"
max_delay = "10s"
)");
  algorithms::Decision d;
  d.retry_after_ms = 123;
  // now = 10.250 s: the next window starts in 750 ms; 12 already queued
  // (limit 5) fill two more windows.
  EXPECT_EQ(DelayFor(rule(0), d, 0, 10'250), 750);
  EXPECT_EQ(DelayFor(rule(0), d, 12, 10'250), 750 + 2'000);
  EXPECT_EQ(DelayFor(rule(1), d, 12, 10'250), 123);
}

}  // namespace
}  // namespace tollgate::gateway
