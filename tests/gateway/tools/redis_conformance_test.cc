// The Redis store decides exactly as the local store: `tollgate replay` with
// --store redis and --store local gives the same output, row for row, on
// generated traces for every algorithm, parameter mix and multi-window limit,
// and with a settled column (reservations settled to their actual cost) for
// every algorithm that settles.
#include <gtest/gtest.h>

#include <random>
#include <sstream>

#include "algorithms/settle.h"
#include "algorithms/validate.h"
#include "gateway/tools/replay.h"
#include "redis_server.h"

namespace tollgate::gateway {
namespace {

using algorithms::Algorithm;
using algorithms::LimitParams;

LimitParams Make(Algorithm a, std::int64_t limit, std::int64_t window_ms, std::int64_t burst = -1,
                 std::int64_t sub_windows = 10, bool nodelay = false) {
  LimitParams p;
  p.algorithm = a;
  p.limit = limit;
  p.window_ms = window_ms;
  p.burst = burst >= 0 ? burst : (a == Algorithm::kTokenBucket ? limit : 0);
  p.sub_windows = sub_windows;
  p.shaping = nodelay ? algorithms::Shaping::kNoDelay : algorithms::Shaping::kDelay;
  return p;
}

std::vector<std::vector<LimitParams>> Limits() {
  std::vector<std::vector<LimitParams>> out;
  for (auto [l, w, b] :
       {std::tuple{1, 1000, 1}, {5, 1000, 5}, {7, 1000, 3}, {3, 60000, 10}, {100, 1000, 100}}) {
    out.push_back({Make(Algorithm::kTokenBucket, l, w, b)});
  }
  for (auto [l, w, b, nodelay] : {std::tuple{1, 1000, 0, false},
                                  {5, 1000, 2, false},
                                  {5, 1000, 2, true},
                                  {2, 60000, 5, false},
                                  {50, 100, 10, true}}) {
    out.push_back({Make(Algorithm::kLeakyBucket, l, w, b, 10, nodelay)});
  }
  for (Algorithm a : {Algorithm::kFixedWindow, Algorithm::kSlidingLog, Algorithm::kTwoBucket}) {
    for (auto [l, w] : {std::pair{1, 1000}, {5, 1000}, {7, 250}, {3, 60000}, {40, 500}}) {
      out.push_back({Make(a, l, w)});
    }
  }
  for (auto [l, w, n] :
       {std::tuple{10, 1000, 10}, {5, 600, 3}, {3, 1000, 1}, {20, 60000, 6}, {4, 10, 10}}) {
    out.push_back({Make(Algorithm::kSubWindow, l, w, -1, n)});
  }
  // Several windows, all or nothing (one script for every algorithm).
  for (Algorithm a : {Algorithm::kTokenBucket, Algorithm::kLeakyBucket, Algorithm::kFixedWindow,
                      Algorithm::kSlidingLog, Algorithm::kSubWindow, Algorithm::kTwoBucket}) {
    out.push_back({Make(a, 4, 1000, a == Algorithm::kLeakyBucket ? 3 : -1, 5),
                   Make(a, 10, 10000, a == Algorithm::kLeakyBucket ? 9 : -1, 5)});
  }
  out.push_back({Make(Algorithm::kSlidingLog, 3, 1000), Make(Algorithm::kSlidingLog, 5, 3000),
                 Make(Algorithm::kSlidingLog, 8, 5000)});
  return out;
}

std::int64_t MaxCost(const std::vector<LimitParams>& windows) {
  for (std::int64_t c = 3; c > 1; --c) {
    if (!algorithms::ValidateCost(windows, c)) return c;
  }
  return 1;
}

// What a generated trace's rows say beyond t_ms,key,cost.
enum class Settles { kNo, kYes };

// With Settles::kYes, a fourth column `settled`: the units a request
// really cost, from 0 to twice its cost plus one (refunds, charges into
// debt), or empty (the reservation stays) one row in five.
std::string Trace(const std::vector<LimitParams>& windows, unsigned seed,
                  Settles settles = Settles::kNo) {
  std::mt19937 rng(seed);
  const std::int64_t w = windows.front().window_ms;
  const std::int64_t max_cost = MaxCost(windows);
  std::uniform_int_distribution<int> key(0, 2);
  std::uniform_int_distribution<std::int64_t> cost(1, max_cost);
  std::uniform_int_distribution<int> kind(0, 9);
  std::ostringstream out;
  out << (settles == Settles::kYes ? "t_ms,key,cost,settled\n" : "t_ms,key,cost\n");
  std::int64_t t = static_cast<std::int64_t>(rng() % 100000);
  for (int i = 0; i < 250; ++i) {
    switch (kind(rng)) {
      case 0:
      case 1:
      case 2:
        break;  // same instant
      case 3:
      case 4:
      case 5:
        t += 1 + rng() % 5;
        break;  // a burst
      case 6:
      case 7:
        t += rng() % (w / 4 + 1);
        break;  // within the window
      case 8:
        t += rng() % (2 * w + 1);
        break;  // across windows
      default:
        t += w - 1 + rng() % 3;
        break;  // at a boundary
    }
    const std::int64_t c = cost(rng);
    out << t << ",k" << key(rng) << "," << c;
    if (settles == Settles::kYes) {
      out << ",";
      if (rng() % 5 != 0) out << static_cast<std::int64_t>(rng() % (2 * c + 2));
    }
    out << "\n";
  }
  return out.str();
}

std::string Replay(const std::vector<LimitParams>& windows, const std::string& trace,
                   const std::optional<store::RedisAddress>& redis) {
  ReplayOptions options;
  options.windows = windows;
  options.redis = redis;
  std::istringstream in(trace);
  std::ostringstream out, err;
  EXPECT_EQ(RunReplay(options, in, out, err), 0) << err.str();
  return out.str();
}

// Replays generated traces of every limit (of those that settle, with
// Settles::kYes) through both stores and compares them row by row; the
// number of traces.
int CompareStores(Settles settles) {
  testing::RedisServer redis;
  std::string error;
  const auto address = store::ParseRedisUrl(redis.url(), error);
  EXPECT_TRUE(address) << error;
  if (!address) return 0;
  int traces = 0;
  for (const auto& windows : Limits()) {
    EXPECT_EQ(algorithms::ValidateWindows(windows), std::nullopt);
    if (settles == Settles::kYes && !algorithms::CanSettle(windows[0].algorithm)) continue;
    for (unsigned seed = 1; seed <= 8; ++seed) {
      const unsigned salt = settles == Settles::kYes ? 104729 : 7919;
      const std::string trace =
          Trace(windows, seed * salt + static_cast<unsigned>(traces), settles);
      const std::string local = Replay(windows, trace, std::nullopt);
      const std::string remote = Replay(windows, trace, address);
      EXPECT_EQ(local, remote) << algorithms::AlgorithmName(windows[0].algorithm) << " x"
                               << windows.size() << " L=" << windows[0].limit
                               << " W=" << windows[0].window_ms << " seed " << seed;
      if (local != remote) return traces;
      ++traces;
    }
  }
  return traces;
}

TEST(RedisConformance, SameDecisionsAsTheLocalStore) {
  EXPECT_GE(CompareStores(Settles::kNo), 200);
}

// Reservations settled to their actual cost (store/lua/settle.lua against
// algorithms/settle.cc): every decision and every settle's answer alike.
TEST(RedisConformance, SameSettlesAsTheLocalStore) { EXPECT_GE(CompareStores(Settles::kYes), 200); }

}  // namespace
}  // namespace tollgate::gateway
