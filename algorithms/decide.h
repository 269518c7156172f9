// The six rate-limit algorithms as pure functions, exactly as defined in
// docs/algorithms.md. No I/O, clock or locks; integer arithmetic only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "algorithms/limit.h"

namespace tollgate::algorithms {

// Decides one request of `cost` units at `now_ms` against every window of a
// limit, all or nothing: `states[i]` (see state.h) belongs to `windows[i]`.
// States change only when the request is allowed. A cost above a window's
// capacity can never pass: it is answered NeverPasses(windows) before any
// arithmetic with it, so no cost overflows the windows' products.
// Preconditions: every window passed ValidateLimit(); cost >= 1;
// windows.size() == states.size() >= 1; 0 <= now_ms <= kMaxTimeMs
// (validate.h).
Decision Decide(std::span<const LimitParams> windows, std::span<std::byte* const> states,
                std::int64_t now_ms, std::int64_t cost);

// Single-window convenience form of Decide().
Decision Decide(const LimitParams& window, std::byte* state, std::int64_t now_ms,
                std::int64_t cost);

// Whether `cost` is above the capacity of any of `windows` (validate.h's
// Capacity): a request that no state of these windows could ever allow.
bool ExceedsCapacity(std::span<const LimitParams> windows, std::int64_t cost);

// The answer to such a request, for every store alike: refused, nothing
// remaining, and a retry_after_ms and reset_ms of the longest window (a
// bound to wait for, since no wait makes it pass).
Decision NeverPasses(std::span<const LimitParams> windows);

// What one window's state allows at `now_ms`, without changing it: the
// `remaining` and `reset_ms` a decision would report for it, and how long
// until a request of one unit would be allowed (0: now). For looking at a
// key (the admin API); the Redis store's key_peek.lua answers the same.
struct WindowView {
  std::int64_t remaining = 0;
  std::int64_t reset_ms = 0;
  std::int64_t retry_after_ms = 0;
  // The algorithm's own state at now_ms: token_bucket and leaky_bucket
  // their level in units (a token, or a queued request, is window_ms
  // units); fixed_window, sub_window and sliding_log the units counted in
  // the window (a sliding log's length); two_bucket the current fixed
  // window's count, and `previous` the previous window's.
  std::int64_t level = 0;
  std::int64_t previous = 0;
};
WindowView Inspect(const LimitParams& window, std::byte* state, std::int64_t now_ms);

// How long until a request of `cost` units would be allowed by one
// window's state (0: now), without changing it.
std::int64_t RetryAfter(const LimitParams& window, std::byte* state, std::int64_t now_ms,
                        std::int64_t cost);

}  // namespace tollgate::algorithms
