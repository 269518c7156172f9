// Internal to decide.cc: the bucket algorithms, token_bucket and
// leaky_bucket, as defined in docs/algorithms.md (a level that drains or
// refills with time). Pure functions, as decide.h.
#pragma once

#include <cstdint>

#include "algorithms/family_common.h"
#include "algorithms/state.h"

namespace tollgate::algorithms::family {
// Internal linkage: the calls of decide.cc, the one includer, are inlined
// as if these were written in it.
namespace {

using std::int64_t;

// ---- token_bucket -------------------------------------------------------

int64_t TokenLevel(const LimitParams& p, const BucketState& s, int64_t now_ms) {
  return std::min(p.burst * p.window_ms, s.level + ClampedElapsed(p, s.last_ms, now_ms) * p.limit);
}

int64_t TokenRetryAfter(const LimitParams& p, const BucketState& s, int64_t now_ms, int64_t cost) {
  const int64_t level = TokenLevel(p, s, now_ms);
  const int64_t need = cost * p.window_ms;
  return level >= need ? 0 : CeilDiv(need - level, p.limit);
}

void TokenConsume(const LimitParams& p, BucketState& s, int64_t now_ms, int64_t cost) {
  s.level = TokenLevel(p, s, now_ms) - cost * p.window_ms;
  s.last_ms = std::max(s.last_ms, now_ms);
}

// Whole tokens; 0 while a settle's debt keeps the level below empty.
int64_t TokenRemaining(const LimitParams& p, int64_t level) {
  return level > 0 ? level / p.window_ms : 0;
}

Snapshot TokenPeek(const LimitParams& p, const BucketState& s, int64_t now_ms) {
  const int64_t level = TokenLevel(p, s, now_ms);
  return {TokenRemaining(p, level), CeilDiv(p.burst * p.window_ms - level, p.limit)};
}

// The single-window decision in one pass: the level is computed once (the
// general path computes it for retry_after, consume and peek alike). After a
// consume the level seen by peek is the consumed one, since last_ms becomes
// max(last_ms, now_ms) and no time has elapsed since then.
// store/lua/token_bucket.lua's token_bucket_fused mirrors it.
Decision TokenDecideFused(const LimitParams& p, BucketState& s, int64_t now_ms, int64_t cost) {
  Decision d;
  int64_t level = TokenLevel(p, s, now_ms);
  const int64_t need = cost * p.window_ms;
  d.allowed = level >= need;
  if (d.allowed) {
    level -= need;
    s.level = level;
    s.last_ms = std::max(s.last_ms, now_ms);
  } else {
    d.retry_after_ms = CeilDiv(need - level, p.limit);
  }
  d.remaining = TokenRemaining(p, level);
  d.reset_ms = CeilDiv(p.burst * p.window_ms - level, p.limit);
  d.window = 0;
  d.window_reset_ms = d.reset_ms;
  return d;
}

// ---- leaky_bucket -------------------------------------------------------

int64_t LeakyLevel(const LimitParams& p, const BucketState& s, int64_t now_ms) {
  return std::max<int64_t>(0, s.level - ClampedElapsed(p, s.last_ms, now_ms) * p.limit);
}

int64_t LeakyRetryAfter(const LimitParams& p, const BucketState& s, int64_t now_ms, int64_t cost) {
  const int64_t level = LeakyLevel(p, s, now_ms);
  const int64_t over = level + (cost - 1) * p.window_ms - p.burst * p.window_ms;
  return over <= 0 ? 0 : CeilDiv(over, p.limit);
}

int64_t LeakyConsume(const LimitParams& p, BucketState& s, int64_t now_ms, int64_t cost) {
  s.level = LeakyLevel(p, s, now_ms) + cost * p.window_ms;
  s.last_ms = std::max(s.last_ms, now_ms);
  if (p.shaping == Shaping::kNoDelay) return 0;
  return CeilDiv(s.level - p.window_ms, p.limit);
}

Snapshot LeakyPeek(const LimitParams& p, const BucketState& s, int64_t now_ms) {
  const int64_t level = LeakyLevel(p, s, now_ms);
  const int64_t capacity = p.burst * p.window_ms;
  const int64_t remaining = level <= capacity ? (capacity - level) / p.window_ms + 1 : 0;
  return {remaining, CeilDiv(level, p.limit)};
}

}  // namespace
}  // namespace tollgate::algorithms::family
