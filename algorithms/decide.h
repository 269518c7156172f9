// The six rate-limit algorithms as pure functions, exactly as defined in
// shared/spec/algorithms.md. No I/O, clock or locks; integer arithmetic only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "algorithms/limit.h"

namespace tollgate::algorithms {

// Decides one request of `cost` units at `now_ms` against every window of a
// limit, all or nothing: `states[i]` (see state.h) belongs to `windows[i]`.
// States change only when the request is allowed. Preconditions: every
// window passed ValidateLimit() and ValidateCost(); windows.size() ==
// states.size() >= 1; 0 <= now_ms <= kMaxTimeMs (validate.h).
Decision Decide(std::span<const LimitParams> windows, std::span<std::byte* const> states,
                std::int64_t now_ms, std::int64_t cost);

// Single-window convenience form of Decide().
Decision Decide(const LimitParams& window, std::byte* state, std::int64_t now_ms,
                std::int64_t cost);

}  // namespace tollgate::algorithms
