// The algorithms at the edges of what the configuration accepts: the
// largest window and the largest limit that ValidateLimit() lets through,
// times from 0 to kMaxTimeMs, costs up to int64's largest. A cost above the
// capacity is refused without touching the state; everything else is
// decided without signed overflow (the sanitizer build, `make test-asan`,
// turns any overflow here into a failure).
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "algorithms/decide.h"
#include "algorithms/state.h"
#include "algorithms/validate.h"
#include "tests/algorithms/extreme_limits.h"

namespace tollgate::algorithms {
namespace {

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

class DecideBounds : public ::testing::TestWithParam<int> {
 protected:
  Algorithm algorithm() const { return static_cast<Algorithm>(GetParam()); }
};

TEST_P(DecideBounds, CostsAboveTheCapacityTakeNothingAndNothingOverflows) {
  for (const LimitParams& p : Extremes(algorithm())) {
    SCOPED_TRACE(::testing::Message() << AlgorithmName(p.algorithm) << " limit=" << p.limit
                                      << " window_ms=" << p.window_ms << " burst=" << p.burst);
    ASSERT_EQ(ValidateLimit(p), std::nullopt);
    const std::int64_t capacity = Capacity(p);
    for (const std::int64_t start : {std::int64_t{0}, kMaxTimeMs / 2, kMaxTimeMs - 1}) {
      OwnedState state(std::span<const LimitParams>(&p, 1), start);
      std::byte* s = state.windows()[0];
      // Refused, before and after the key has been used, and the key's
      // state is what it was.
      for (int round = 0; round < 2; ++round) {
        const WindowView before = Inspect(p, s, start);
        for (const std::int64_t cost : {capacity + 1, capacity * 2, kInt64Max / 2, kInt64Max}) {
          const Decision d = Decide(p, s, start, cost);
          EXPECT_FALSE(d.allowed) << cost;
          EXPECT_GE(d.retry_after_ms, 1) << cost;
        }
        const WindowView after = Inspect(p, s, start);
        EXPECT_EQ(after.remaining, before.remaining);
        EXPECT_EQ(after.level, before.level);
        EXPECT_EQ(after.previous, before.previous);
        // The whole capacity at once passes on a fresh key; then nothing
        // more at the same instant.
        if (round == 0) {
          EXPECT_TRUE(Decide(p, s, start, capacity).allowed);
          EXPECT_FALSE(Decide(p, s, start, 1).allowed);
        }
      }
      // Decisions at the latest time there is, after the longest idle.
      const Decision last = Decide(p, s, kMaxTimeMs, 1);
      EXPECT_EQ(last.allowed, last.retry_after_ms == 0);
      EXPECT_GE(last.retry_after_ms, 0);
      const WindowView view = Inspect(p, s, kMaxTimeMs);
      EXPECT_GE(view.remaining, 0);
      EXPECT_GE(view.reset_ms, 0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryAlgorithm, DecideBounds, ::testing::Range(0, kAlgorithmCount),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(AlgorithmName(static_cast<Algorithm>(info.param)));
                         });

}  // namespace
}  // namespace tollgate::algorithms
