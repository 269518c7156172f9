// Property tests: on random traces, every decision's `remaining` and
// `retry_after_ms` match the definitions, checked by brute force (replaying
// the history into a fresh state and probing).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "algorithms/decide.h"
#include "algorithms/state.h"
#include "algorithms/validate.h"

namespace tollgate::algorithms {
namespace {

struct Request {
  std::int64_t t;
  std::int64_t cost;
};

class BruteForce {
 public:
  explicit BruteForce(std::vector<LimitParams> windows) : windows_(std::move(windows)) {}

  // Decision for `probe` after replaying `history` into a fresh state.
  Decision After(const std::vector<Request>& history, std::size_t count, Request probe,
                 std::int64_t extra_units_at_probe = 0) const {
    OwnedState state(windows_, history.empty() ? probe.t : history.front().t);
    for (std::size_t i = 0; i < count; ++i) {
      Decide(windows_, state.windows(), history[i].t, history[i].cost);
    }
    for (std::int64_t u = 0; u < extra_units_at_probe; ++u) {
      Decide(windows_, state.windows(), probe.t, 1);
    }
    return Decide(windows_, state.windows(), probe.t, probe.cost);
  }

  // Largest n such that n unit requests at t all pass after history[0..count].
  std::int64_t Remaining(const std::vector<Request>& history, std::size_t count,
                         std::int64_t t) const {
    OwnedState state(windows_, history.front().t);
    for (std::size_t i = 0; i < count; ++i) {
      Decide(windows_, state.windows(), history[i].t, history[i].cost);
    }
    std::int64_t n = 0;
    while (n < 100000 && Decide(windows_, state.windows(), t, 1).allowed) ++n;
    return n;
  }

  // Smallest d >= 1 such that `request` passes at t + d after history[0..count).
  std::int64_t RetryAfter(const std::vector<Request>& history, std::size_t count, Request request,
                          std::int64_t bound) const {
    for (std::int64_t d = 1; d <= bound; ++d) {
      if (After(history, count, {request.t + d, request.cost}).allowed) return d;
    }
    return -1;
  }

 private:
  std::vector<LimitParams> windows_;
};

struct Case {
  Algorithm algorithm;
  int windows;
};

class DecideProperty : public ::testing::TestWithParam<Case> {};

std::vector<LimitParams> RandomWindows(std::mt19937_64& rng, Case c) {
  std::vector<LimitParams> windows;
  for (int i = 0; i < c.windows; ++i) {
    LimitParams p;
    p.algorithm = c.algorithm;
    p.limit = std::uniform_int_distribution<std::int64_t>(1, 5)(rng);
    p.sub_windows = std::uniform_int_distribution<std::int64_t>(1, 4)(rng);
    p.window_ms = p.sub_windows * std::uniform_int_distribution<std::int64_t>(1, 12)(rng);
    p.burst = std::uniform_int_distribution<std::int64_t>(0, 4)(rng);
    if (c.algorithm == Algorithm::kTokenBucket) p.burst = std::max<std::int64_t>(1, p.burst);
    if (c.algorithm != Algorithm::kTokenBucket && c.algorithm != Algorithm::kLeakyBucket) {
      p.burst = 0;
    }
    p.shaping = (rng() & 1) ? Shaping::kDelay : Shaping::kNoDelay;
    windows.push_back(p);
  }
  return windows;
}

TEST_P(DecideProperty, RemainingAndRetryMatchTheDefinitions) {
  std::mt19937_64 rng(static_cast<unsigned>(GetParam().algorithm) * 1000 + GetParam().windows);
  for (int trace = 0; trace < 60; ++trace) {
    const std::vector<LimitParams> windows = RandomWindows(rng, GetParam());
    ASSERT_EQ(ValidateWindows(windows), std::nullopt);
    std::int64_t capacity = Capacity(windows.front());
    std::int64_t longest = 0;
    for (const LimitParams& w : windows) {
      capacity = std::min(capacity, Capacity(w));
      longest = std::max(longest, w.window_ms * (w.burst + 2));
    }
    BruteForce brute(windows);
    std::vector<Request> history;
    OwnedState state(windows, 0);
    std::int64_t t = 0;
    for (int i = 0; i < 30; ++i) {
      t += std::uniform_int_distribution<std::int64_t>(0, 6)(rng);
      const std::int64_t cost = std::uniform_int_distribution<std::int64_t>(1, capacity)(rng);
      const Decision d = Decide(windows, state.windows(), t, cost);
      const std::size_t before = history.size();
      history.push_back({t, cost});
      SCOPED_TRACE(testing::Message()
                   << "trace " << trace << " request " << i << " t=" << t << " cost=" << cost
                   << " L=" << windows[0].limit << " W=" << windows[0].window_ms);
      EXPECT_EQ(d.remaining, brute.Remaining(history, before + 1, t));
      if (d.allowed) {
        EXPECT_EQ(d.retry_after_ms, 0);
      } else {
        // Spec: the maximum over the limiting windows; for a single window
        // that is exactly the smallest passing delay.
        const std::int64_t smallest = brute.RetryAfter(history, before, {t, cost}, 4 * longest);
        if (windows.size() == 1) {
          EXPECT_EQ(d.retry_after_ms, smallest);
        } else {
          EXPECT_LE(d.retry_after_ms, smallest);
          EXPECT_GE(d.retry_after_ms, 1);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, DecideProperty,
    ::testing::Values(Case{Algorithm::kTokenBucket, 1}, Case{Algorithm::kLeakyBucket, 1},
                      Case{Algorithm::kFixedWindow, 1}, Case{Algorithm::kSlidingLog, 1},
                      Case{Algorithm::kSubWindow, 1}, Case{Algorithm::kTwoBucket, 1},
                      Case{Algorithm::kFixedWindow, 2}, Case{Algorithm::kSlidingLog, 3},
                      Case{Algorithm::kTokenBucket, 2}, Case{Algorithm::kSubWindow, 2}),
    [](const auto& info) {
      return std::string(AlgorithmName(info.param.algorithm)) + "_" +
             std::to_string(info.param.windows);
    });

TEST(Validate, RejectsWhatCannotBeExact) {
  LimitParams p{Algorithm::kFixedWindow, 1 << 20, 1LL << 31, 0, 10, Shaping::kDelay};
  EXPECT_NE(ValidateLimit(p), std::nullopt);
  p = {Algorithm::kSubWindow, 10, 1000, 0, 7, Shaping::kDelay};
  EXPECT_EQ(*ValidateLimit(p),
            "window 1000ms is not divisible into 7 sub_windows of whole milliseconds");
  p = {Algorithm::kTokenBucket, 10, 1000, 0, 10, Shaping::kDelay};
  EXPECT_NE(ValidateLimit(p), std::nullopt);
  p.burst = 3;
  EXPECT_EQ(ValidateLimit(p), std::nullopt);
  const std::vector<LimitParams> windows{p};
  EXPECT_EQ(*ValidateCost(windows, 4),
            "cost 4 exceeds the capacity 3 of this token_bucket limit, so it could never pass");
}

}  // namespace
}  // namespace tollgate::algorithms
