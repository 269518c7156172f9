// Parameter validation shared by the config loader and `tollgate replay`.
// Each function returns std::nullopt when valid, or a sentence for a user.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "algorithms/limit.h"

namespace tollgate::algorithms {

inline constexpr std::int64_t kMaxExactProduct = std::int64_t{1} << 50;
// The latest `now_ms` a decision may be asked at (2^50 ms, about 35,000
// years after the clock's origin): times, and the window boundaries the
// algorithms compute from them, then fit int64 and stay exact in the Redis
// scripts' doubles. Clocks are far below it; `tollgate replay` refuses trace
// times above it (a time near 2^63 overflowed the algorithms' arithmetic).
inline constexpr std::int64_t kMaxTimeMs = kMaxExactProduct;
inline constexpr std::int64_t kMaxSubWindows = 1000;
inline constexpr std::int64_t kMaxSlidingLogLimit = 100000;
inline constexpr std::size_t kMaxWindows = 8;

// The largest cost a single request can ever be allowed.
std::int64_t Capacity(const LimitParams& params);

std::optional<std::string> ValidateLimit(const LimitParams& params);
// A limit with several windows: same algorithm in each, at most kMaxWindows.
std::optional<std::string> ValidateWindows(std::span<const LimitParams> windows);
std::optional<std::string> ValidateCost(std::span<const LimitParams> windows, std::int64_t cost);

}  // namespace tollgate::algorithms
