#include "algorithms/validate.h"

#include <fmt/format.h>

#include <limits>

namespace tollgate::algorithms {
namespace {

// a * b <= kMaxExactProduct, without overflowing.
bool ProductIsExact(std::int64_t a, std::int64_t b) {
  return a >= 0 && b >= 0 && (b == 0 || a <= kMaxExactProduct / b);
}

}  // namespace

std::int64_t Capacity(const LimitParams& params) {
  switch (params.algorithm) {
    case Algorithm::kTokenBucket:
      return params.burst;
    case Algorithm::kLeakyBucket:
      return params.burst + 1;
    default:
      return params.limit;
  }
}

std::optional<std::string> ValidateLimit(const LimitParams& p) {
  // A fixed window of 0 refuses every request (envoyproxy/ratelimit's
  // requests_per_unit: 0); the other algorithms divide by their rate.
  const std::int64_t least = p.algorithm == Algorithm::kFixedWindow ? 0 : 1;
  if (p.limit < least) return fmt::format("limit must be at least {}, got {}", least, p.limit);
  if (p.window_ms < 1) return fmt::format("window must be at least 1ms, got {}ms", p.window_ms);
  if (p.burst < 0) return fmt::format("burst must not be negative, got {}", p.burst);
  if (p.algorithm == Algorithm::kTokenBucket && p.burst < 1) {
    return "token_bucket needs a burst of at least 1 (the bucket's capacity)";
  }
  if (p.limit > kMaxExactProduct - p.burst - 1 ||
      !ProductIsExact(p.limit + p.burst + 1, p.window_ms)) {
    return fmt::format(
        "limit {} with burst {} over a window of {}ms is too large: (limit + burst + 1) * "
        "window must stay below 2^50 so that every store computes exactly",
        p.limit, p.burst, p.window_ms);
  }
  if (p.algorithm == Algorithm::kSubWindow) {
    if (p.sub_windows < 1 || p.sub_windows > kMaxSubWindows) {
      return fmt::format("sub_windows must be between 1 and {}, got {}", kMaxSubWindows,
                         p.sub_windows);
    }
    if (p.window_ms % p.sub_windows != 0) {
      return fmt::format("window {}ms is not divisible into {} sub_windows of whole milliseconds",
                         p.window_ms, p.sub_windows);
    }
    if (p.limit > std::numeric_limits<std::uint32_t>::max()) {
      return fmt::format("sub_window counts are 32-bit: limit must be at most {}, got {}",
                         std::numeric_limits<std::uint32_t>::max(), p.limit);
    }
  }
  if (p.algorithm == Algorithm::kSlidingLog && p.limit > kMaxSlidingLogLimit) {
    return fmt::format(
        "sliding_log keeps one timestamp per request: limit must be at most {}, got {} "
        "(sub_window approximates it in constant memory)",
        kMaxSlidingLogLimit, p.limit);
  }
  return std::nullopt;
}

std::optional<std::string> ValidateWindows(std::span<const LimitParams> windows) {
  if (windows.empty()) return "a limit needs at least one window";
  if (windows.size() > kMaxWindows) {
    return fmt::format("a limit has at most {} windows, got {}", kMaxWindows, windows.size());
  }
  for (const LimitParams& w : windows) {
    if (w.algorithm != windows.front().algorithm) {
      return "all windows of one limit use the same algorithm";
    }
    if (auto error = ValidateLimit(w)) return error;
  }
  return std::nullopt;
}

std::optional<std::string> ValidateCost(std::span<const LimitParams> windows, std::int64_t cost) {
  if (cost < 1) return fmt::format("cost must be at least 1, got {}", cost);
  for (const LimitParams& w : windows) {
    // A window of 0 refuses every cost: that is what it is for.
    if (w.limit > 0 && cost > Capacity(w)) {
      return fmt::format("cost {} exceeds the capacity {} of this {} limit, so it could never pass",
                         cost, Capacity(w), AlgorithmName(w.algorithm));
    }
  }
  return std::nullopt;
}

}  // namespace tollgate::algorithms
