// Settling a reservation: a request admitted with a reserved cost is later
// settled to its actual cost, in one step on the state the reservation was
// taken from (docs/algorithms.md, "Settling a reservation"). Pure functions
// like decide.h: no I/O, clock or locks; integer arithmetic only.
#pragma once

#include <cstdint>
#include <span>

#include "algorithms/limit.h"

namespace tollgate::algorithms {

// Whether `algorithm` can settle a reservation. sliding_log cannot: its
// state does not say which entries a request made. One table (settle.cc);
// the configuration must refuse `settle` on an algorithm without it.
bool CanSettle(Algorithm algorithm);

// Settles a reservation of `reserved` units, taken at `reserved_at_ms`, to
// `actual` units at `now_ms`, on every window of a limit (`states[i]`
// belongs to `windows[i]`): each window gets `reserved - actual` back (a
// refund) or is charged `actual - reserved` more (debt), as the
// algorithm's section of docs/algorithms.md says.
// Preconditions: every window passed ValidateLimit() and CanSettle() is
// true for it; 0 <= reserved <= the windows' capacity (it was admitted);
// actual >= 0; windows.size() == states.size() >= 1;
// 0 <= reserved_at_ms, now_ms <= kMaxTimeMs (validate.h).
//
// Returns the state after the settle, as a decision would show it at
// now_ms: `allowed` says whether a request of one unit would pass now and
// `retry_after_ms` is its wait (0 when it would); `remaining`, `reset_ms`,
// `window` and `window_reset_ms` as in a decision (limit.h); `delay_ms` 0.
Decision Settle(std::span<const LimitParams> windows, std::span<std::byte* const> states,
                std::int64_t reserved_at_ms, std::int64_t now_ms, std::int64_t reserved,
                std::int64_t actual);

// Single-window form of Settle().
Decision Settle(const LimitParams& window, std::byte* state, std::int64_t reserved_at_ms,
                std::int64_t now_ms, std::int64_t reserved, std::int64_t actual);

}  // namespace tollgate::algorithms
