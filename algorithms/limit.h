// Rate-limit parameters and decisions shared by every algorithm and store.
// All times are integer milliseconds; see docs/algorithms.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "algorithms/algorithm_list.h"

namespace tollgate::algorithms {

// One per entry of TOLLGATE_ALGORITHMS (algorithms/algorithm_list.h).
enum class Algorithm : std::uint8_t {
#define TOLLGATE_ALGORITHM_ENUMERATOR(enumerator, name) enumerator,
  TOLLGATE_ALGORITHMS(TOLLGATE_ALGORITHM_ENUMERATOR)
#undef TOLLGATE_ALGORITHM_ENUMERATOR
};
#define TOLLGATE_ALGORITHM_NAME(enumerator, name) #name,
// By Algorithm: "token_bucket", "leaky_bucket", ...
inline constexpr std::string_view kAlgorithmNames[] = {TOLLGATE_ALGORITHMS(TOLLGATE_ALGORITHM_NAME)};
#undef TOLLGATE_ALGORITHM_NAME
inline constexpr int kAlgorithmCount = static_cast<int>(std::size(kAlgorithmNames));

// Leaky bucket only: kDelay holds an allowed request until its turn (shaping);
// kNoDelay forwards it at once (policing, nginx's `nodelay`).
enum class Shaping : std::uint8_t { kDelay, kNoDelay };

std::string_view AlgorithmName(Algorithm algorithm);
std::optional<Algorithm> ParseAlgorithm(std::string_view name);
// "token_bucket, leaky_bucket, ..." for error messages.
std::string_view AlgorithmNames();

// One window of a limit. `burst` is already resolved to its default
// (token_bucket: limit, leaky_bucket: 0); `sub_windows` only matters for
// sub_window. Values are validated by ValidateLimit() before use.
struct LimitParams {
  Algorithm algorithm = Algorithm::kTokenBucket;
  std::int64_t limit = 1;         // L, requests per window
  std::int64_t window_ms = 1;     // W
  std::int64_t burst = 0;         // B
  std::int64_t sub_windows = 10;  // N
  Shaping shaping = Shaping::kDelay;

  friend bool operator==(const LimitParams&, const LimitParams&) = default;
};

struct Decision {
  bool allowed = false;
  std::int64_t remaining = 0;
  std::int64_t retry_after_ms = 0;   // 0 when allowed
  std::int64_t delay_ms = 0;         // leaky_bucket shaping only
  std::int64_t reset_ms = 0;         // the longest over the windows: the key is fresh again
  std::uint8_t window = 0;           // the window whose `remaining` is reported (the lowest)
  std::int64_t window_reset_ms = 0;  // reset_ms of that window alone (for headers)
};

}  // namespace tollgate::algorithms
