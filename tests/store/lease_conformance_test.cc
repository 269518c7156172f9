// The lease scripts (store/lua/lease) against their C++ text
// (algorithms/lease.h) on generated sequences of takes and returns, for
// every algorithm that leases and for several windows at once: the same
// replies, call for call, on a real redis-server (time = "client"); and
// takes sent together, which share a script call, as if sent one by one.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <algorithm>
#include <map>
#include <random>
#include <span>

#include "algorithms/lease.h"
#include "algorithms/validate.h"
#include "redis_server.h"
#include "store/redis_store.h"
#include "store_sinks.h"

namespace tollgate::store {
namespace {

using algorithms::Algorithm;
using algorithms::LimitParams;

LimitParams Make(Algorithm a, std::int64_t limit, std::int64_t window_ms, std::int64_t burst = -1,
                 std::int64_t sub_windows = 10) {
  LimitParams p = Window(a, limit, window_ms, burst >= 0 ? burst : 0);
  if (burst < 0 && a == Algorithm::kTokenBucket) p.burst = limit;
  p.sub_windows = sub_windows;
  if (a == Algorithm::kLeakyBucket) p.shaping = algorithms::Shaping::kNoDelay;
  return p;
}

std::vector<std::vector<LimitParams>> Limits() {
  std::vector<std::vector<LimitParams>> out;
  for (auto [l, w, b] :
       {std::tuple{1, 1000, 1}, {5, 1000, 5}, {7, 1000, 3}, {100, 1000, 100}, {50, 60000, 20}}) {
    out.push_back({Make(Algorithm::kTokenBucket, l, w, b)});
  }
  for (auto [l, w, b] : {std::tuple{1, 1000, 0}, {5, 1000, 2}, {50, 100, 10}}) {
    out.push_back({Make(Algorithm::kLeakyBucket, l, w, b)});
  }
  for (Algorithm a : {Algorithm::kFixedWindow, Algorithm::kTwoBucket}) {
    for (auto [l, w] : {std::pair{1, 1000}, {5, 1000}, {7, 250}, {40, 500}, {100, 3000}}) {
      out.push_back({Make(a, l, w)});
    }
  }
  for (auto [l, w] : {std::pair{1, 1000}, {5, 1000}, {7, 250}, {40, 500}}) {
    out.push_back({Make(Algorithm::kSlidingLog, l, w)});
  }
  for (auto [l, w, n] : {std::tuple{10, 1000, 10}, {5, 600, 3}, {3, 1000, 1}, {40, 2000, 4}}) {
    out.push_back({Make(Algorithm::kSubWindow, l, w, -1, n)});
  }
  // Several windows: one lease from all of them.
  for (Algorithm a : {Algorithm::kTokenBucket, Algorithm::kFixedWindow, Algorithm::kSubWindow,
                      Algorithm::kTwoBucket, Algorithm::kSlidingLog}) {
    out.push_back({Make(a, 6, 1000, -1, 5), Make(a, 15, 5000, -1, 5)});
  }
  return out;
}

struct Outstanding {
  std::string key;
  std::int64_t units;
  std::vector<std::int64_t> stamps;
  std::int64_t taken_ms;
};

// When `used` units of a lease taken at `taken_ms` were admitted, by `now`:
// random times between the two, in runs of equal times, oldest first.
std::vector<algorithms::SlidingLog::Run> UsedAt(std::mt19937& rng, std::int64_t used,
                                                std::int64_t taken_ms, std::int64_t now) {
  std::vector<std::int64_t> times;
  for (std::int64_t u = 0; u < used; ++u) {
    times.push_back(taken_ms + static_cast<std::int64_t>(rng() % (now - taken_ms + 1)));
  }
  std::sort(times.begin(), times.end());
  std::vector<algorithms::SlidingLog::Run> runs;
  for (std::int64_t at : times) {
    if (!runs.empty() && runs.back().ts == at) {
      ++runs.back().count;
    } else {
      runs.push_back({at, 1});
    }
  }
  return runs;
}

class LeaseConformance : public ::testing::Test {
 protected:
  ValuesResult Take(RedisStore& store, const std::string& key, const LimitSpec& spec,
                    std::int64_t now, std::int64_t want, std::int64_t use, std::int64_t hold,
                    algorithms::TakeUse take_use) {
    Values v;
    store.TakeLease(key, spec, now, want, use, hold, v, take_use);
    while (!v.done) io_.run_one();
    return v.result;
  }
  CountResult Return(RedisStore& store, const std::string& key, const LimitSpec& spec,
                     std::int64_t now, const std::vector<std::int64_t>& stamps, std::int64_t used,
                     std::int64_t unused, std::span<const algorithms::SlidingLog::Run> used_at) {
    Answer a;
    store.ReturnLease(key, spec, now, stamps, used, unused, used_at, &a);
    while (!a.done) io_.run_one();
    return a.result;
  }

  RedisOptions MakeOptions(const testing::RedisServer& redis) {
    std::string error;
    RedisOptions options;
    options.address = *ParseRedisUrl(redis.url(), error);
    options.timeout_ms = 1000;
    options.time = RedisTime::kClient;
    // Keys outlive the virtual time a sequence spans only by min_ttl.
    options.min_ttl_ms = 10'000'000;
    return options;
  }

  boost::asio::io_context io_;
  RedisHealth health_;
};

TEST_F(LeaseConformance, ScriptsMatchTheirCppText) {
  testing::RedisServer redis;
  RedisStore store(io_, MakeOptions(redis), health_);
  int sequences = 0;
  std::int64_t granted = 0, refused = 0, returned = 0, moved = 0, spent = 0;
  for (const auto& windows : Limits()) {
    ASSERT_EQ(algorithms::ValidateWindows(windows), std::nullopt);
    const LimitSpec spec = LimitSpec::Make(windows);
    for (unsigned seed = 1; seed <= 6; ++seed) {
      std::mt19937 rng(seed * 7919 + static_cast<unsigned>(sequences));
      const std::int64_t w = windows.front().window_ms;
      std::int64_t t = 1'000'000 + static_cast<std::int64_t>(rng() % 100000);
      const std::string prefix = "s" + std::to_string(sequences) + "k";
      std::map<std::string, algorithms::LeaseState> local;
      std::vector<Outstanding> held;
      for (int i = 0; i < 120; ++i) {
        switch (rng() % 6) {
          case 0:
            break;
          case 1:
          case 2:
            t += 1 + rng() % 5;
            break;
          case 3:
            t += rng() % (w / 3 + 1);
            break;
          case 4:
            t += rng() % (2 * w + 1);
            break;
          default:
            t += w - 1 + rng() % 3;
            break;
        }
        const std::string key = prefix + std::to_string(rng() % 2);
        auto it = local.try_emplace(key, windows, t).first;
        const bool give_back = !held.empty() && rng() % 3 == 0;
        std::string where = "seq " + std::to_string(sequences) + " op " + std::to_string(i) + " " +
                            std::string(algorithms::AlgorithmName(windows[0].algorithm));
        if (give_back) {
          const std::size_t at = rng() % held.size();
          Outstanding o = held[at];
          held.erase(held.begin() + static_cast<std::ptrdiff_t>(at));
          const std::int64_t used = static_cast<std::int64_t>(rng() % (o.units + 1));
          // Mostly with the admission times, as a gateway returns; now and
          // then without (the used slots stay at the stamp).
          std::vector<algorithms::SlidingLog::Run> used_at;
          if (rng() % 5 != 0) used_at = UsedAt(rng, used, o.taken_ms, t);
          if (!used_at.empty() && algorithms::HasLogLease(windows)) ++moved;
          auto lit = local.find(o.key);
          const std::int64_t want = lit->second.Return(t, o.stamps, used, o.units - used, used_at);
          const CountResult got =
              Return(store, o.key, spec, t, o.stamps, used, o.units - used, used_at);
          ASSERT_EQ(got.status, StoreStatus::kOk) << where;
          ASSERT_EQ(got.value, want) << where << " return";
          returned += want;
          continue;
        }
        const std::int64_t want_units = 1 + static_cast<std::int64_t>(rng() % 6);
        const std::int64_t use = 50 + static_cast<std::int64_t>(rng() % (2 * w));
        const std::int64_t hold = use + static_cast<std::int64_t>(rng() % 100);
        // Now and then a cold key's take, spent at once (no lease kept).
        const algorithms::TakeUse take_use =
            rng() % 4 == 0 ? algorithms::TakeUse::kSpent : algorithms::TakeUse::kLease;
        const algorithms::LeaseGrant want = it->second.Take(t, want_units, use, hold, take_use);
        const ValuesResult got = Take(store, key, spec, t, want_units, use, hold, take_use);
        ASSERT_EQ(got.status, StoreStatus::kOk) << where;
        std::vector<std::int64_t> expect = {want.units, want.valid_ms, want.retry_after_ms};
        expect.insert(expect.end(), want.stamps.begin(), want.stamps.end());
        ASSERT_EQ(got.values, expect) << where << " take of " << want_units << " at " << t
                                      << (take_use == algorithms::TakeUse::kSpent ? " (spent)" : "");
        if (want.units > 0 && take_use == algorithms::TakeUse::kSpent) {
          ++spent;
        } else if (want.units > 0) {
          held.push_back({key, want.units, want.stamps, t});
          granted += want.units;
        } else {
          ++refused;
        }
      }
      ++sequences;
    }
  }
  EXPECT_GE(sequences, 100);
  // The sequences reach every branch: grants, refusals, units given back.
  EXPECT_GT(granted, 1000);
  EXPECT_GT(refused, 100);
  EXPECT_GT(returned, 100);
  EXPECT_GT(spent, 300);
  // sliding_log returns that move used slots to their admission times.
  EXPECT_GT(moved, 50);
}

// Takes sent in one turn share a lease_take.lua call (RedisStore batches
// them as decisions): keys taken from one after the other, a key twice in
// one call included, exactly as the same takes sent one by one.
TEST_F(LeaseConformance, TakesSentTogetherMatchTakesOneByOne) {
  testing::RedisServer redis;
  RedisStore store(io_, MakeOptions(redis), health_);
  int limits = 0;
  std::int64_t granted = 0, refused = 0, batched = 0;
  for (const auto& windows : Limits()) {
    const LimitSpec spec = LimitSpec::Make(windows);
    std::mt19937 rng(static_cast<unsigned>(limits) * 104729 + 17);
    const std::int64_t w = windows.front().window_ms;
    std::int64_t t = 1'000'000;
    const std::string prefix = "b" + std::to_string(limits) + "k";
    std::map<std::string, algorithms::LeaseState> local;
    const std::int64_t use = w / 2 + 1;
    const std::int64_t hold = use + 20;
    for (int round = 0; round < 12; ++round) {
      t += static_cast<std::int64_t>(rng() % (w / 2 + 1));
      const std::size_t n = 1 + rng() % 8;
      std::vector<std::string> keys;
      std::vector<std::int64_t> wants;
      std::vector<algorithms::TakeUse> uses;
      std::vector<Values> got(n);
      const std::uint64_t calls_before = health_.coalesced.load();
      for (std::size_t i = 0; i < n; ++i) {
        keys.push_back(prefix + std::to_string(rng() % 6));
        wants.push_back(1 + static_cast<std::int64_t>(rng() % 4));
        uses.push_back(rng() % 3 == 0 ? algorithms::TakeUse::kSpent : algorithms::TakeUse::kLease);
        store.TakeLease(keys[i], spec, t, wants[i], use, hold, got[i], uses[i]);
      }
      for (std::size_t i = 0; i < n; ++i) {
        while (!got[i].done) io_.run_one();
      }
      // All but the first joined the first's call.
      EXPECT_EQ(health_.coalesced.load() - calls_before, n - 1);
      batched += static_cast<std::int64_t>(n - 1);
      for (std::size_t i = 0; i < n; ++i) {
        auto it = local.try_emplace(keys[i], windows, t).first;
        const algorithms::LeaseGrant want = it->second.Take(t, wants[i], use, hold, uses[i]);
        std::vector<std::int64_t> expect = {want.units, want.valid_ms, want.retry_after_ms};
        expect.insert(expect.end(), want.stamps.begin(), want.stamps.end());
        const std::string where = "limit " + std::to_string(limits) + " round " +
                                  std::to_string(round) + " take " + std::to_string(i);
        ASSERT_EQ(got[i].result.status, StoreStatus::kOk) << where;
        ASSERT_EQ(got[i].result.values, expect) << where;
        (want.units > 0 ? granted : refused) += 1;
      }
    }
    ++limits;
  }
  EXPECT_GT(granted, 100);
  EXPECT_GT(refused, 50);
  EXPECT_GT(batched, 500);
}

// Under server time (the default) RedisStore writes a limit's take
// arguments once and reuses them for its next takes (RedisStore::
// LeaseCall): takes of two limits in turn, a lease_ttl changed without the
// limit, leased and spent, batched or not, each answered as its own.
TEST_F(LeaseConformance, TakesUnderServerTimeKeepEachLimitsArguments) {
  testing::RedisServer redis;
  RedisOptions options = MakeOptions(redis);
  options.time = RedisTime::kServer;
  RedisStore store(io_, options, health_);
  // Refilled once a day: what is taken stays taken.
  const LimitSpec small = LimitSpec::Make({Window(algorithms::Algorithm::kTokenBucket, 1,
                                                  86'400'000, 10)});
  const LimitSpec large = LimitSpec::Make({Window(algorithms::Algorithm::kTokenBucket, 1,
                                                  86'400'000, 100)});
  std::int64_t use = 1000;
  std::map<const LimitSpec*, std::int64_t> left = {{&small, 10}, {&large, 100}};
  for (int round = 0; round < 6; ++round) {
    if (round == 3) use = 700;  // a reload's new lease_ttl, same limit
    std::vector<Values> got(4);
    const LimitSpec* specs[] = {&small, &large, &large, &small};
    const algorithms::TakeUse uses[] = {algorithms::TakeUse::kLease, algorithms::TakeUse::kSpent,
                                        algorithms::TakeUse::kLease, algorithms::TakeUse::kSpent};
    for (std::size_t i = 0; i < got.size(); ++i) {
      store.TakeLease("k", *specs[i], 0, 1, use, use + 20, got[i], uses[i]);
      if (round % 2 == 1) {
        while (!got[i].done) io_.run_one();  // one by one
      }
    }
    for (std::size_t i = 0; i < got.size(); ++i) {
      while (!got[i].done) io_.run_one();
      const std::string where = "round " + std::to_string(round) + " take " + std::to_string(i);
      ASSERT_EQ(got[i].result.status, StoreStatus::kOk) << where;
      const std::int64_t expect_units = left[specs[i]] > 0 ? 1 : 0;
      left[specs[i]] -= expect_units;
      ASSERT_FALSE(got[i].result.values.empty()) << where;
      EXPECT_EQ(got[i].result.values[0], expect_units) << where;
      if (uses[i] == algorithms::TakeUse::kLease && expect_units > 0) {
        // {1, valid_ms = lease_ttl, 0, the lease's id}
        ASSERT_EQ(got[i].result.values.size(), 4u) << where;
        EXPECT_EQ(got[i].result.values[1], use) << where;
      } else {
        EXPECT_EQ(got[i].result.values.size(), 3u) << where;
      }
    }
  }
  EXPECT_EQ(left[&small], 0);  // 12 takes of one unit from a burst of 10
  EXPECT_EQ(left[&large], 88);
}

}  // namespace
}  // namespace tollgate::store
