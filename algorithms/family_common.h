// Internal to decide.cc: what every algorithm family's code shares (the
// window's snapshot, the bucket's clamped elapsed time). Pure functions, as decide.h.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "algorithms/integer.h"
#include "algorithms/limit.h"
#include "algorithms/state.h"

namespace tollgate::algorithms::family {
// Internal linkage: the calls of decide.cc, the one includer, are inlined
// as if these were written in it.
namespace {

using std::int64_t;

// What a window says about a request before anything is consumed.
struct Snapshot {
  int64_t remaining;
  int64_t reset_ms;
};

// Elapsed time since `last_ms`, clamped so that multiplying it by L cannot
// overflow: no bucket needs more than ceil(2*(B+1)*W/L) + 1 ms to refill or
// drain, debt of a settle included (settle.h).
int64_t ClampedElapsed(const LimitParams& p, int64_t last_ms, int64_t now_ms) {
  const int64_t cap = CeilDiv(2 * (p.burst + 1) * p.window_ms, p.limit) + 1;
  return std::clamp<int64_t>(now_ms - last_ms, 0, cap);
}

}  // namespace
}  // namespace tollgate::algorithms::family
