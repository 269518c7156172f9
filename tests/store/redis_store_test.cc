// RedisStore against a real redis-server: decisions, NOSCRIPT, a killed and
// restarted Redis, a paused Redis (deadlines, circuit breaker), bounded
// pending commands, authentication.
#include "store/redis_store.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <deque>
#include <random>
#include <vector>

#include "calendar_cases.h"
#include "redis_server.h"
#include "store/local_store.h"
#include "store_sinks.h"

namespace tollgate::store {
namespace {

using testing::RedisServer;
using Steady = std::chrono::steady_clock;

// The default deadline is generous: it covers a new connection's
// handshake and script loads (all of them, more with each feature), which a
// store's first decision waits for, on a loaded machine or under a
// sanitizer. Tests of deadlines pass a short one and wait for the
// connection first (UntilOk).
RedisOptions OptionsFor(const RedisServer& redis, std::int64_t timeout_ms = 1000) {
  std::string error;
  RedisOptions o;
  o.address = *ParseRedisUrl(redis.url(), error);
  o.timeout_ms = timeout_ms;
  o.time = RedisTime::kClient;
  return o;
}

// How long a test waits for what must happen before it calls it a hang.
// Generous on purpose: it only fails a test that would otherwise never
// end, never a slow machine. Tests assert what happens, not how long it
// takes.
constexpr std::chrono::seconds kHang(30);

class RedisStoreTest : public ::testing::Test {
 protected:
  // Runs the loop until `r` is answered; false (a test failure) on a hang.
  bool Await(Result& r) {
    const auto give_up = Steady::now() + kHang;
    while (!r.done && Steady::now() < give_up) io_.run_one_for(std::chrono::milliseconds(100));
    EXPECT_TRUE(r.done) << "no answer within " << kHang.count() << " s";
    return r.done;
  }
  // A sink that outlives every store of the test, so that a decision that
  // hung (a test failure) can still be answered by the store's destructor.
  Result& NewResult() { return results_.emplace_back(); }
  StoreResult Decide(RedisStore& store, std::string_view key, const LimitSpec& spec,
                     std::int64_t now_ms = 1000) {
    Result& r = NewResult();
    store.Decide({key, &spec, 1, now_ms}, r);
    if (!Await(r)) {
      StoreResult hung;
      hung.status = StoreStatus::kTimeout;
      return hung;
    }
    return r.result;
  }
  // Polls until a decision succeeds; false if none does before kHang.
  bool UntilOk(RedisStore& store, const LimitSpec& spec) {
    const auto give_up = Steady::now() + kHang;
    while (Steady::now() < give_up) {
      if (Decide(store, "probe", spec).status == StoreStatus::kOk) return true;
      io_.run_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  boost::asio::io_context io_;
  RedisHealth health_;
  std::deque<Result> results_;  // NewResult's: a deque keeps their addresses
};

TEST(RedisUrl, Forms) {
  std::string error;
  auto a = ParseRedisUrl("redis://user:s%40cret@10.0.0.1:7000/3", error);
  ASSERT_TRUE(a) << error;
  EXPECT_EQ(a->host, "10.0.0.1");
  EXPECT_EQ(a->port, 7000);
  EXPECT_EQ(a->user, "user");
  EXPECT_EQ(a->password, "s@cret");
  EXPECT_EQ(a->db, 3);
  auto b = ParseRedisUrl("redis://:pw@localhost", error);
  ASSERT_TRUE(b) << error;
  EXPECT_EQ(b->port, 6379);
  EXPECT_EQ(b->user, "");
  EXPECT_EQ(b->password, "pw");
  EXPECT_FALSE(ParseRedisUrl("http://x:1", error));
  EXPECT_FALSE(ParseRedisUrl("redis://x:1/abc", error));
  EXPECT_NE(error.find("database"), std::string::npos);
}

TEST(RedisKey, HashTagAndEscaping) {
  // Rule "per ip" + 4 raw address bytes: one hash tag, nothing unescaped.
  const std::string key = std::string("per-ip\x1f") + std::string("\x7f\x00\x00\x01", 4);
  EXPECT_EQ(RedisKey("tg:", key, 0xabcdef01, 1), "tg:{per-ip:%7F%00%00%01}:abcdef01:1");
  EXPECT_EQ(RedisKey("tg:", "r\x1f{a}:b%", 1, 0), "tg:{r:%7Ba%7D%3Ab%25}:00000001:0");
}

TEST_F(RedisStoreTest, DecidesAndSharesStateBetweenStores) {
  RedisServer redis;
  const LimitSpec spec = FixedWindow(3, 60'000);
  RedisStore a(io_, OptionsFor(redis), health_);
  RedisStore b(io_, OptionsFor(redis), health_);
  EXPECT_TRUE(Decide(a, "k", spec).decision.allowed);
  EXPECT_TRUE(Decide(b, "k", spec).decision.allowed);
  const StoreResult third = Decide(a, "k", spec);
  EXPECT_TRUE(third.decision.allowed);
  EXPECT_EQ(third.decision.remaining, 0);
  const StoreResult fourth = Decide(b, "k", spec);
  ASSERT_EQ(fourth.status, StoreStatus::kOk);
  EXPECT_FALSE(fourth.decision.allowed);
  EXPECT_EQ(fourth.decision.retry_after_ms, 59'000);
  // Every key has a TTL no longer than the state needs (the window's end).
  const std::string ttl = redis.Command({"PTTL", RedisKey("tollgate:", "k", spec.fingerprint, 0)});
  EXPECT_GT(std::stoll(ttl), 0);
  EXPECT_LE(std::stoll(ttl), 59'000);
}

TEST_F(RedisStoreTest, SettlesAReservationOnTheSharedState) {
  RedisServer redis;
  // One token bucket window (the fused script's state) and two fixed
  // windows (the multi-window script's).
  const LimitSpec bucket =
      LimitSpec::Make({Window(algorithms::Algorithm::kTokenBucket, 1, 1'000'000'000, 100)});
  const LimitSpec windows =
      LimitSpec::Make({Window(algorithms::Algorithm::kFixedWindow, 10, 1000),
                       Window(algorithms::Algorithm::kFixedWindow, 50, 10'000)});
  RedisStore a(io_, OptionsFor(redis), health_);
  RedisStore b(io_, OptionsFor(redis), health_);
  auto settle = [&](RedisStore& store, const SettleRequest& request) {
    Result& r = NewResult();
    store.Settle(request, r);
    EXPECT_TRUE(Await(r));
    EXPECT_EQ(r.result.status, StoreStatus::kOk);
    return r.result.decision;
  };
  const DecideRequest reservation{"k", &bucket, 100, 1000};
  Result& reserved = NewResult();
  a.Decide(reservation, reserved);
  ASSERT_TRUE(Await(reserved));
  ASSERT_TRUE(reserved.result.decision.allowed);
  EXPECT_EQ(settle(b, {reservation, 40, 1000}).remaining, 60);
  // 30 tokens beyond a reservation of 60: debt.
  const DecideRequest second{"k", &bucket, 60, 1000};
  Result& again = NewResult();
  a.Decide(second, again);
  ASSERT_TRUE(Await(again));
  ASSERT_TRUE(again.result.decision.allowed);
  const algorithms::Decision debt = settle(a, {second, 90, 1000});
  EXPECT_FALSE(debt.allowed);
  EXPECT_EQ(debt.remaining, 0);
  EXPECT_EQ(debt.retry_after_ms, 31'000'000'000);  // 30 tokens of debt and one more
  EXPECT_EQ(Decide(b, "k", bucket).decision.retry_after_ms, 31'000'000'000);

  const DecideRequest counted{"w", &windows, 8, 100};
  Result& w = NewResult();
  b.Decide(counted, w);
  ASSERT_TRUE(Await(w));
  const algorithms::Decision d = settle(a, {counted, 3, 200});
  EXPECT_EQ(d.remaining, 7);
  EXPECT_EQ(d.window, 0);
  // After the first window's end its refund is dropped, the second's kept.
  const DecideRequest late{"w", &windows, 2, 300};
  Result& l = NewResult();
  b.Decide(late, l);
  ASSERT_TRUE(Await(l));
  EXPECT_EQ(settle(a, {late, 0, 1500}).remaining, 10);
  EXPECT_EQ(Decide(a, "w", windows, 1500).decision.remaining, 9);
}

TEST_F(RedisStoreTest, CalendarPeriodsAcrossAMonthEndAndDaylightSavingChanges) {
  RedisServer redis;
  RedisStore store(io_, OptionsFor(redis), health_);
  auto answer = [&](Result& r) {
    EXPECT_TRUE(Await(r));
    EXPECT_EQ(r.result.status, StoreStatus::kOk);
    return r.result.decision;
  };
  RunCalendarCases({[&](const DecideRequest& request) {
                      Result& r = NewResult();
                      store.Decide(request, r);
                      return answer(r);
                    },
                    [&](const SettleRequest& request) {
                      Result& r = NewResult();
                      store.Settle(request, r);
                      return answer(r);
                    }});
}

TEST_F(RedisStoreTest, ASettleUnderServerTimeTakesTheReservationsAge) {
  RedisServer redis;
  // A window of 10^9 ms: the test's few ms cross its end with a chance
  // of one in millions.
  const LimitSpec spec = FixedWindow(10, 1'000'000'000);
  RedisOptions options = OptionsFor(redis);
  options.time = RedisTime::kServer;
  RedisStore store(io_, options, health_);
  // The caller's clock is far from Redis's: only the difference counts.
  const DecideRequest reservation{"k", &spec, 10, 5};
  Result& r = NewResult();
  store.Decide(reservation, r);
  ASSERT_TRUE(Await(r));
  ASSERT_TRUE(r.result.decision.allowed);
  Result& s = NewResult();
  store.Settle({reservation, 4, 7}, s);
  ASSERT_TRUE(Await(s));
  ASSERT_EQ(s.result.status, StoreStatus::kOk);
  EXPECT_EQ(s.result.decision.remaining, 6);
}

// Decisions and settles of earlier reservations at later times, with
// windows that roll over in between: store/lua/settle.lua answers as
// algorithms::Settle does on the local store, and leaves the same state
// (the decisions after the settles agree). `tollgate replay`'s settles,
// at the reservation's own time, are compared in
// tests/gateway/tools/redis_conformance_test.cc.
TEST_F(RedisStoreTest, SettlesLaterAsTheLocalStoreDoes) {
  RedisServer redis;
  using algorithms::Algorithm;
  auto window = [](Algorithm a, std::int64_t limit, std::int64_t window_ms, std::int64_t burst,
                   algorithms::Shaping shaping = algorithms::Shaping::kNoDelay) {
    algorithms::LimitParams p = Window(a, limit, window_ms, burst);
    p.sub_windows = 5;
    p.shaping = shaping;
    return p;
  };
  const std::vector<LimitSpec> limits = {
      LimitSpec::Make({window(Algorithm::kTokenBucket, 5, 1000, 8)}),
      LimitSpec::Make({window(Algorithm::kLeakyBucket, 5, 1000, 4, algorithms::Shaping::kDelay)}),
      LimitSpec::Make({window(Algorithm::kLeakyBucket, 3, 500, 2)}),
      LimitSpec::Make({window(Algorithm::kFixedWindow, 8, 1000, 0)}),
      LimitSpec::Make({window(Algorithm::kSubWindow, 8, 1000, 0)}),
      LimitSpec::Make({window(Algorithm::kTwoBucket, 8, 1000, 0)}),
      LimitSpec::Make({window(Algorithm::kTokenBucket, 4, 1000, 4),
                       window(Algorithm::kTokenBucket, 10, 10'000, 10)}),
      LimitSpec::Make({window(Algorithm::kSubWindow, 4, 1000, 0),
                       window(Algorithm::kSubWindow, 10, 10'000, 0)}),
      LimitSpec::Make(
          {window(Algorithm::kTwoBucket, 4, 1000, 0), window(Algorithm::kTwoBucket, 10, 5000, 0)}),
  };
  RedisStore remote(io_, OptionsFor(redis), health_);
  int settles = 0;
  for (std::size_t l = 0; l < limits.size(); ++l) {
    const LimitSpec& spec = limits[l];
    const algorithms::LimitParams& first = spec.windows[0];
    const bool compare_reset =
        first.algorithm != Algorithm::kSubWindow && first.algorithm != Algorithm::kTwoBucket;
    LocalStore local;
    std::mt19937 rng(static_cast<unsigned>(l) * 7919 + 17);
    std::vector<DecideRequest> outstanding;
    const std::string keys[] = {"s" + std::to_string(l) + "a", "s" + std::to_string(l) + "b"};
    std::int64_t t = 1'000'000 + static_cast<std::int64_t>(rng() % 10'000);
    for (int step = 0; step < 300; ++step) {
      t += static_cast<std::int64_t>(rng() % 4 == 0 ? rng() % (2 * first.window_ms) : rng() % 50);
      algorithms::Decision want;
      Result& got = NewResult();
      if (!outstanding.empty() && rng() % 2 == 0) {
        const std::size_t i = rng() % outstanding.size();
        const DecideRequest reservation = outstanding[i];
        outstanding.erase(outstanding.begin() + static_cast<std::ptrdiff_t>(i));
        const SettleRequest request{
            reservation, static_cast<std::int64_t>(rng() % (2 * reservation.cost + 2)), t};
        want = local.SettleNow(request);
        remote.Settle(request, got);
        ++settles;
      } else {
        const DecideRequest request{keys[rng() % 2], &spec,
                                    1 + static_cast<std::int64_t>(rng() % 3), t};
        want = local.DecideNow(request);
        remote.Decide(request, got);
        if (want.allowed) outstanding.push_back(request);
      }
      ASSERT_TRUE(Await(got));
      ASSERT_EQ(got.result.status, StoreStatus::kOk);
      const algorithms::Decision& d = got.result.decision;
      const auto where = ::testing::Message() << "limit " << l << " step " << step << " t " << t;
      ASSERT_EQ(d.allowed, want.allowed) << where;
      ASSERT_EQ(d.remaining, want.remaining) << where;
      ASSERT_EQ(d.retry_after_ms, want.retry_after_ms) << where;
      ASSERT_EQ(d.delay_ms, want.delay_ms) << where;
      ASSERT_EQ(d.window, want.window) << where;
      if (compare_reset) ASSERT_EQ(d.reset_ms, want.reset_ms) << where;
    }
  }
  EXPECT_GE(settles, 1000);
}

TEST_F(RedisStoreTest, ATokenBucketNeverMisreadsStateOfAnotherFormat) {
  RedisServer redis;
  const LimitSpec spec = TokenBucket(5, 1000, 5);
  RedisStore store(io_, OptionsFor(redis), health_);
  ASSERT_TRUE(Decide(store, "k", spec).decision.allowed);
  // Packed state: level and last as two doubles.
  const std::string key = RedisKey("tollgate:", "k", spec.fingerprint, 0);
  EXPECT_EQ(redis.Command({"STRLEN", key}), "16");
  // The text state of the earlier format (as a hand edit or an old gateway
  // writing under this key would leave it) is refused, not decoded.
  EXPECT_EQ(redis.Command({"SET", key, "4000 1000"}), "OK");
  EXPECT_EQ(Decide(store, "k", spec).status, StoreStatus::kError);
  EXPECT_EQ(redis.Command({"SET", key, "4000000000 1000000"}), "OK");
  EXPECT_EQ(Decide(store, "k", spec).status, StoreStatus::kError);
}

TEST_F(RedisStoreTest, ReloadsScriptsAfterFlush) {
  RedisServer redis;
  const LimitSpec spec = FixedWindow(10, 60'000);
  // The decision after the flush waits for the scripts to load again,
  // within OptionsFor's generous deadline.
  RedisStore store(io_, OptionsFor(redis), health_);
  ASSERT_EQ(Decide(store, "k", spec).status, StoreStatus::kOk);
  EXPECT_EQ(redis.Command({"SCRIPT", "FLUSH"}), "OK");
  const StoreResult r = Decide(store, "k", spec);
  ASSERT_EQ(r.status, StoreStatus::kOk);
  EXPECT_EQ(r.decision.remaining, 8);
  EXPECT_GE(health_.noscript.load(), 1u);
}

TEST_F(RedisStoreTest, KilledRedisIsUnavailableThenResumesOnceRestarted) {
  RedisServer redis;
  const LimitSpec spec = FixedWindow(1000, 60'000);
  RedisStore store(io_, OptionsFor(redis), health_);
  ASSERT_EQ(Decide(store, "k", spec).status, StoreStatus::kOk);
  EXPECT_EQ(health_.connections_up.load(), 1);
  redis.Kill();
  // Every decision is answered (Decide fails the test on a hang), none
  // with a decision, while the store keeps trying to reconnect between
  // them.
  for (int i = 0; i < 20; ++i) {
    const StoreResult r = Decide(store, "k", spec);
    EXPECT_NE(r.status, StoreStatus::kOk) << i;
    io_.run_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(health_.connections_up.load(), 0);
  redis.Start();
  EXPECT_TRUE(UntilOk(store, spec));
  EXPECT_EQ(health_.connections_up.load(), 1);
}

TEST_F(RedisStoreTest, PausedRedisTimesOutOpensTheCircuitAndRecovers) {
  RedisServer redis;
  const LimitSpec spec = FixedWindow(1000, 60'000);
  RedisOptions options = OptionsFor(redis, 20);
  options.breaker_failures = 3;
  RedisStore store(io_, options, health_);
  // A new connection loads every script before its first decision, which
  // can outlast 20 ms on a slow build (ThreadSanitizer) or a loaded
  // machine, as can any one decision there: wait for one to succeed.
  ASSERT_TRUE(UntilOk(store, spec));
  const std::uint64_t timeouts = health_.timeouts.load();
  const std::uint64_t unavailable = health_.unavailable.load();
  // Stopped until Resume(): the connection stays up, nothing is answered.
  redis.Pause();
  // The circuit is closed for the first breaker_failures decisions: each
  // is sent and times out.
  for (int i = 0; i < options.breaker_failures; ++i) {
    EXPECT_EQ(Decide(store, "k", spec).status, StoreStatus::kTimeout) << i;
  }
  EXPECT_EQ(health_.timeouts.load() - timeouts,
            static_cast<std::uint64_t>(options.breaker_failures));
  EXPECT_EQ(health_.circuits_open.load(), 1);
  EXPECT_EQ(health_.connections_up.load(), 1);
  // The open circuit refuses without sending: inline, within Decide(). One
  // probe per breaker_open_ms is sent; should the test be held up that
  // long, the probe times out (Redis is still stopped) and the next
  // decision is refused.
  bool refused_inline = false;
  for (int i = 0; i < 10 && !refused_inline; ++i) {
    Result& r = NewResult();
    store.Decide({"k", &spec, 1, 1000}, r);
    refused_inline = r.done;
    if (refused_inline) {
      EXPECT_EQ(r.result.status, StoreStatus::kUnavailable);
    } else if (Await(r)) {
      EXPECT_EQ(r.result.status, StoreStatus::kTimeout);
    }
  }
  EXPECT_TRUE(refused_inline);
  EXPECT_GT(health_.unavailable.load(), unavailable);
  EXPECT_EQ(health_.circuits_open.load(), 1);
  // Once Redis answers again, a probe succeeds and closes the circuit.
  redis.Resume();
  EXPECT_TRUE(UntilOk(store, spec));
  EXPECT_EQ(health_.circuits_open.load(), 0);
}

TEST_F(RedisStoreTest, PendingCommandsAreBounded) {
  RedisServer redis;
  const LimitSpec spec = FixedWindow(1000, 60'000);
  RedisOptions options = OptionsFor(redis, 100);
  options.max_pending = 8;
  RedisStore store(io_, options, health_);
  // Connected, scripts loaded (which can outlast 100 ms on a loaded
  // machine), nothing pending: UntilOk's last decision was answered after
  // every earlier one.
  ASSERT_TRUE(UntilOk(store, spec));
  redis.Pause();
  // Distinct keys: decisions of one key would share one call (below).
  constexpr int kDecisions = 50;
  std::vector<std::string> keys;
  for (int i = 0; i < kDecisions; ++i) keys.push_back("k" + std::to_string(i));
  std::vector<Result*> results;
  for (int i = 0; i < kDecisions; ++i) {
    results.push_back(&NewResult());
    store.Decide({keys[i], &spec, 1, 1000}, *results.back());
  }
  int inline_refusals = 0;
  for (const Result* r : results) inline_refusals += r->done ? 1 : 0;
  EXPECT_EQ(inline_refusals, 42);
  // The 8 sent ones end by their deadline.
  for (Result* r : results) EXPECT_TRUE(Await(*r));
  redis.Resume();
}

std::uint64_t EvalshaCalls(RedisServer& redis) {
  const std::string stats = redis.Command({"INFO", "commandstats"});
  const std::size_t at = stats.find("cmdstat_evalsha:calls=");
  if (at == std::string::npos) return 0;
  return std::stoull(stats.substr(at + 22));
}

// Decides `keys[i % keys.size()]` with cost i % 3 + 1 for i < n, all in
// one turn, at `now`, and expects what the local store decides for the same
// sequence.
void ExpectSameAsLocal(boost::asio::io_context& io, Store& store, LocalStore& local,
                       const LimitSpec& spec, const std::vector<std::string>& keys, std::size_t n,
                       std::int64_t now) {
  std::vector<Result> results(n);
  for (std::size_t i = 0; i < n; ++i) {
    store.Decide({keys[i % keys.size()], &spec, static_cast<std::int64_t>(i % 3 + 1), now},
                 results[i]);
  }
  for (Result& r : results) {
    while (!r.done) io.run_one();
  }
  for (std::size_t i = 0; i < n; ++i) {
    const algorithms::Decision want =
        local.DecideNow({keys[i % keys.size()], &spec, static_cast<std::int64_t>(i % 3 + 1), now});
    ASSERT_EQ(results[i].result.status, StoreStatus::kOk) << i;
    const algorithms::Decision& got = results[i].result.decision;
    EXPECT_EQ(got.allowed, want.allowed) << i;
    EXPECT_EQ(got.remaining, want.remaining) << i;
    EXPECT_EQ(got.retry_after_ms, want.retry_after_ms) << i;
    EXPECT_EQ(got.delay_ms, want.delay_ms) << i;
    EXPECT_EQ(got.reset_ms, want.reset_ms) << i;
    EXPECT_EQ(got.window, want.window) << i;
    EXPECT_EQ(got.window_reset_ms, want.window_reset_ms) << i;
  }
}

TEST_F(RedisStoreTest, ConcurrentDecisionsOfOneKeyShareOneScriptCall) {
  using algorithms::Algorithm;
  RedisServer redis;
  RedisStore store(io_, OptionsFor(redis), health_);
  const std::vector<LimitSpec> specs = {
      TokenBucket(10, 1000, 12),  // its own script
      FixedWindow(25, 60'000),
      LimitSpec::Make(
          {Window(Algorithm::kSlidingLog, 30, 1000), Window(Algorithm::kSlidingLog, 50, 10'000)}),
  };
  for (const LimitSpec& spec : specs) {
    LocalStore local;
    ASSERT_EQ(redis.Command({"CONFIG", "RESETSTAT"}), "OK");
    const std::uint64_t coalesced = health_.coalesced.load();
    // 70 decisions of one key in one turn, twice (a later instant), then
    // one of another key.
    for (std::int64_t now : {1000, 1050})
      ExpectSameAsLocal(io_, store, local, spec, {"k"}, 70, now);
    ExpectSameAsLocal(io_, store, local, spec, {"other"}, 1, 1050);
    // Per instant two calls: at most RedisOptions::kMaxBatch decisions each.
    EXPECT_EQ(EvalshaCalls(redis), 2u * 2u + 1u);
    EXPECT_EQ(health_.coalesced.load() - coalesced, 2u * 68u);
  }
}

TEST_F(RedisStoreTest, ConcurrentTokenBucketDecisionsOfManyKeysShareOneScriptCall) {
  RedisServer redis;
  RedisStore store(io_, OptionsFor(redis), health_);
  const LimitSpec spec = TokenBucket(10, 1000, 4);
  LocalStore local;
  const std::uint64_t coalesced = health_.coalesced.load();
  // 60 decisions over 7 keys in turn (each key's decisions interleaved with
  // the others'), at two instants.
  const std::vector<std::string> keys = {"a", "b", "c", "d", "e", "f", "g"};
  for (std::int64_t now : {1000, 1400}) ExpectSameAsLocal(io_, store, local, spec, keys, 60, now);
  EXPECT_EQ(EvalshaCalls(redis), 2u);
  EXPECT_EQ(health_.coalesced.load() - coalesced, 2u * 59u);
}

TEST_F(RedisStoreTest, BatchOfOneSendsACallPerDecision) {
  RedisServer redis;
  RedisOptions options = OptionsFor(redis);
  options.batch = 1;
  RedisStore store(io_, options, health_);
  const LimitSpec spec = TokenBucket(10, 1000, 4);
  LocalStore local;
  const std::uint64_t coalesced = health_.coalesced.load();
  ExpectSameAsLocal(io_, store, local, spec, {"a", "b"}, 9, 1000);
  EXPECT_EQ(EvalshaCalls(redis), 9u);
  EXPECT_EQ(health_.coalesced.load(), coalesced);
}

TEST_F(RedisStoreTest, ACoalescedCallThatTimesOutFailsEachOfItsDecisions) {
  RedisServer redis;
  const LimitSpec spec = FixedWindow(1000, 60'000);
  RedisStore store(io_, OptionsFor(redis, 30), health_);
  // The scripts load within the first decisions' 30 ms only on a quiet
  // machine: wait for them.
  ASSERT_TRUE(UntilOk(store, spec));
  redis.Pause();
  std::vector<Result*> results;
  for (int i = 0; i < 5; ++i) {
    results.push_back(&NewResult());
    store.Decide({"k", &spec, 1, 1000}, *results.back());
  }
  for (Result* r : results) {
    if (Await(*r)) {
      EXPECT_EQ(r->result.status, StoreStatus::kTimeout);
    }
  }
  redis.Resume();
  EXPECT_TRUE(UntilOk(store, spec));
}

TEST_F(RedisStoreTest, WrongPasswordIsAClearFatalError) {
  RedisServer redis("s3cret");
  RedisOptions options = OptionsFor(redis);
  bool fatal = false;
  EXPECT_EQ(CheckRedis(options, fatal), std::nullopt);
  options.address.password = "wrong";
  const auto problem = CheckRedis(options, fatal);
  ASSERT_TRUE(problem);
  EXPECT_TRUE(fatal);
  EXPECT_NE(problem->find("authentication failed"), std::string::npos) << *problem;
  options.address.port = 1;  // nothing listens: retrying may help, not fatal
  ASSERT_TRUE(CheckRedis(options, fatal));
  EXPECT_FALSE(fatal);
}

TEST_F(RedisStoreTest, ServerTimeIsUsedByDefault) {
  RedisServer redis;
  const LimitSpec spec = FixedWindow(5, 1000);
  RedisOptions options = OptionsFor(redis);
  options.time = RedisTime::kServer;
  RedisStore store(io_, options, health_);
  // now_ms is ignored: the window's end comes from Redis's clock.
  const StoreResult r = Decide(store, "k", spec, 0);
  ASSERT_EQ(r.status, StoreStatus::kOk);
  EXPECT_GT(r.decision.reset_ms, 0);
  EXPECT_LE(r.decision.reset_ms, 1000);
}

}  // namespace
}  // namespace tollgate::store
