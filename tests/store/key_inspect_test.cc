// Looking at and resetting a key (the admin API's GET and DELETE
// /api/v1/keys) on both stores: LocalStore::Inspect (algorithms::Inspect)
// and RedisStore::Inspect (store/lua/admin/key_peek.lua) answer the same
// for every algorithm, single and multi-window, at every step of a run of
// decisions; Erase and Reset make a key fresh.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <vector>

#include "redis_server.h"
#include "store/local_store.h"
#include "store/redis_store.h"
#include "store_sinks.h"

namespace tollgate::store {
namespace {

using algorithms::Algorithm;
using testing::RedisServer;

class KeyInspect : public ::testing::Test {
 protected:
  KeyInspect() {
    std::string error;
    RedisOptions o;
    o.address = *ParseRedisUrl(redis_.url(), error);
    o.timeout_ms = 1000;
    o.time = RedisTime::kClient;
    redis_store_ = std::make_unique<RedisStore>(io_, o, health_);
  }

  algorithms::Decision Decide(Store& store, const LimitSpec& spec, std::int64_t now_ms) {
    Result r;
    store.Decide({"k", &spec, 1, now_ms}, r);
    while (!r.done) io_.run_one();
    EXPECT_EQ(r.result.status, StoreStatus::kOk);
    return r.result.decision;
  }
  // Five integers per window, as key_peek.lua answers.
  std::vector<std::int64_t> InspectRedis(const LimitSpec& spec, std::int64_t now_ms) {
    Values v;
    redis_store_->Inspect("k", spec, now_ms, v);
    while (!v.done) io_.run_one();
    EXPECT_EQ(v.result.status, StoreStatus::kOk);
    return v.result.values;
  }
  std::vector<std::int64_t> InspectLocal(const LimitSpec& spec, std::int64_t now_ms) {
    std::vector<algorithms::WindowView> views(spec.windows.size());
    local_.Inspect({"k", &spec, 1, now_ms}, views);
    std::vector<std::int64_t> out;
    for (const algorithms::WindowView& v : views) {
      out.insert(out.end(), {v.remaining, v.reset_ms, v.retry_after_ms, v.level, v.previous});
    }
    return out;
  }

  RedisServer redis_;
  boost::asio::io_context io_;
  RedisHealth health_;
  std::unique_ptr<RedisStore> redis_store_;
  LocalStore local_;
};

algorithms::LimitParams SubWindows(std::int64_t limit, std::int64_t window_ms, std::int64_t n) {
  algorithms::LimitParams p = Window(Algorithm::kSubWindow, limit, window_ms);
  p.sub_windows = n;
  return p;
}

TEST_F(KeyInspect, BothStoresAnswerTheSameForEveryAlgorithm) {
  const std::vector<LimitSpec> specs = [] {
    std::vector<LimitSpec> out;
    out.push_back(LimitSpec::Make({Window(Algorithm::kTokenBucket, 4, 1000, 6)}));
    out.push_back(LimitSpec::Make({Window(Algorithm::kLeakyBucket, 4, 1000, 2)}));
    out.push_back(LimitSpec::Make({Window(Algorithm::kFixedWindow, 4, 1000)}));
    out.push_back(LimitSpec::Make({Window(Algorithm::kSlidingLog, 4, 1000)}));
    out.push_back(LimitSpec::Make({SubWindows(4, 1000, 4)}));
    out.push_back(LimitSpec::Make({Window(Algorithm::kTwoBucket, 4, 1000)}));
    // A rule has one algorithm for all its windows (rules_config.cc).
    out.push_back(LimitSpec::Make({Window(Algorithm::kSlidingLog, 3, 500),
                                   Window(Algorithm::kSlidingLog, 10, 5000)}));
    return out;
  }();
  for (const LimitSpec& spec : specs) {
    SCOPED_TRACE(std::string(algorithms::AlgorithmName(spec.windows[0].algorithm)) + " x" +
                 std::to_string(spec.windows.size()));
    redis_.Command({"FLUSHALL"});
    LocalStore local;
    std::int64_t now = 1'000'000;
    // A key never seen, then after each decision of a run that reaches
    // the limit and goes on in time.
    for (int step = 0; step < 12; ++step) {
      std::vector<algorithms::WindowView> views(spec.windows.size());
      local.Inspect({"k", &spec, 1, now}, views);
      std::vector<std::int64_t> local_values;
      for (const algorithms::WindowView& v : views) {
        local_values.insert(local_values.end(),
                            {v.remaining, v.reset_ms, v.retry_after_ms, v.level, v.previous});
      }
      ASSERT_EQ(InspectRedis(spec, now), local_values) << "step " << step;
      const algorithms::Decision redis_decision = Decide(*redis_store_, spec, now);
      Result r;
      local.Decide({"k", &spec, 1, now}, r);
      ASSERT_EQ(r.result.decision.allowed, redis_decision.allowed) << "step " << step;
      now += step % 3 == 0 ? 0 : 137;
    }
  }
}

// The algorithm's own state (WindowView::level, previous), on both stores:
// a bucket's level in units, what a window counts, two_bucket's two counts.
TEST_F(KeyInspect, TheAlgorithmsOwnState) {
  struct Case {
    LimitSpec spec;
    std::vector<std::int64_t> fresh, after_three, next_window;  // {level, previous}
  };
  const std::vector<Case> cases = {
      // 4 tokens a second, burst 6: a token is 1000 units.
      {LimitSpec::Make({Window(Algorithm::kTokenBucket, 4, 1000, 6)}), {6000, 0}, {3000, 0},
       {6000, 0}},
      // A queue of at most 2 waiting, draining 4 a second: empty, 3 queued
      // (one in service), drained.
      {LimitSpec::Make({Window(Algorithm::kLeakyBucket, 4, 1000, 2)}), {0, 0}, {3000, 0}, {0, 0}},
      {LimitSpec::Make({Window(Algorithm::kFixedWindow, 4, 1000)}), {0, 0}, {3, 0}, {0, 0}},
      {LimitSpec::Make({Window(Algorithm::kSlidingLog, 4, 1000)}), {0, 0}, {3, 0}, {0, 0}},
      {LimitSpec::Make({SubWindows(4, 1000, 4)}), {0, 0}, {3, 0}, {0, 0}},
      {LimitSpec::Make({Window(Algorithm::kTwoBucket, 4, 1000)}), {0, 0}, {3, 0}, {0, 3}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(algorithms::AlgorithmName(c.spec.windows[0].algorithm));
    redis_.Command({"FLUSHALL"});
    LocalStore local;
    auto state = [&](Store& store, std::int64_t now) {
      std::vector<std::int64_t> values;
      if (&store == &local) {
        std::vector<algorithms::WindowView> views(1);
        local.Inspect({"k", &c.spec, 1, now}, views);
        values = {views[0].level, views[0].previous};
      } else {
        const std::vector<std::int64_t> all = InspectRedis(c.spec, now);
        if (all.size() == 5) values = {all[3], all[4]};
      }
      return values;
    };
    // At 1,000,000 ms (the start of a second), then 3 requests, then the
    // next second.
    for (Store* store : {static_cast<Store*>(&local), static_cast<Store*>(redis_store_.get())}) {
      EXPECT_EQ(state(*store, 1'000'000), c.fresh);
      for (int i = 0; i < 3; ++i) EXPECT_TRUE(Decide(*store, c.spec, 1'000'000).allowed);
      EXPECT_EQ(state(*store, 1'000'000), c.after_three);
      EXPECT_EQ(state(*store, 1'001'000), c.next_window);
    }
  }
}

TEST_F(KeyInspect, ResetMakesTheKeyFresh) {
  const LimitSpec spec = LimitSpec::Make(
      {Window(Algorithm::kFixedWindow, 2, 60'000), Window(Algorithm::kSlidingLog, 5, 60'000)});
  const std::vector<std::int64_t> fresh = InspectLocal(spec, 1000);
  for (int i = 0; i < 2; ++i) {
    Decide(*redis_store_, spec, 1000);
    Decide(local_, spec, 1000);
  }
  EXPECT_NE(InspectRedis(spec, 1000), fresh);
  EXPECT_NE(InspectLocal(spec, 1000), fresh);
  Answer reset;
  redis_store_->Reset("k", spec, reset);
  while (!reset.done) io_.run_one();
  ASSERT_EQ(reset.result.status, StoreStatus::kOk);
  EXPECT_GT(reset.result.value, 0);
  EXPECT_TRUE(local_.Erase("k", 0));
  EXPECT_FALSE(local_.Erase("k", 0));
  EXPECT_EQ(InspectRedis(spec, 1000), fresh);
  EXPECT_EQ(InspectLocal(spec, 1000), fresh);
  EXPECT_TRUE(Decide(*redis_store_, spec, 1000).allowed);
}

TEST_F(KeyInspect, AnUnreachableRedisAnswersUnavailable) {
  const LimitSpec spec = FixedWindow(2, 1000);
  redis_.Kill();
  Values v;
  redis_store_->Inspect("k", spec, 1000, v);
  while (!v.done) io_.run_one();
  EXPECT_NE(v.result.status, StoreStatus::kOk);
}

}  // namespace
}  // namespace tollgate::store
