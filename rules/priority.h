// The priority of a waiting request (`priority` on a rule): under
// saturation a place goes to the highest level that waits, and a full
// waiting room pushes out the lowest first (gateway/core/fair_queue.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tollgate::rules {

enum class Priority : std::uint8_t { kHigh = 0, kNormal = 1, kLow = 2 };
inline constexpr std::size_t kPriorityLevels = 3;

}  // namespace tollgate::rules
