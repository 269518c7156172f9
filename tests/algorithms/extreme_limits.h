// The limits at the edges of what the configuration accepts, for the
// algorithms' bounds tests (decide_bounds_test.cc, settle_test.cc).
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "algorithms/limit.h"
#include "algorithms/validate.h"

namespace tollgate::algorithms {

// Two extreme shapes of each algorithm: the longest window with the
// smallest limit, and the largest limit with a 1 ms window (or the
// algorithm's own bound on the limit).
inline std::vector<LimitParams> Extremes(Algorithm algorithm) {
  std::vector<LimitParams> out;
  for (const bool long_window : {true, false}) {
    LimitParams p;
    p.algorithm = algorithm;
    p.shaping = Shaping::kNoDelay;
    p.limit = 1;
    p.burst = algorithm == Algorithm::kTokenBucket ? 1 : 0;
    if (algorithm == Algorithm::kSubWindow) p.sub_windows = kMaxSubWindows;
    if (long_window) {
      p.window_ms = kMaxExactProduct / (p.limit + p.burst + 1);
      if (algorithm == Algorithm::kSubWindow) p.window_ms -= p.window_ms % p.sub_windows;
    } else {
      p.window_ms = algorithm == Algorithm::kSubWindow ? p.sub_windows : 1;
      p.limit = kMaxExactProduct / p.window_ms / 2 - 1;
      if (algorithm == Algorithm::kSlidingLog) p.limit = kMaxSlidingLogLimit;
      if (algorithm == Algorithm::kSubWindow) p.limit = std::numeric_limits<std::uint32_t>::max();
      if (algorithm == Algorithm::kTokenBucket || algorithm == Algorithm::kLeakyBucket) {
        p.burst = p.limit;
      }
    }
    out.push_back(p);
  }
  return out;
}

}  // namespace tollgate::algorithms
