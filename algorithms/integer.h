// Integer division as docs/algorithms.md writes it (Lua's
// math.floor semantics), for the algorithms' C++ text.
#pragma once

#include <cstdint>

namespace tollgate::algorithms {

// ceil(a / b) for a >= 0, b > 0, as docs/algorithms.md writes it.
inline std::int64_t CeilDiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// floor(a / b) for b > 0 and any sign of a.
inline std::int64_t FloorDiv(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if (a % b != 0 && a < 0) --q;
  return q;
}

// j mod n in [0, n).
inline std::int64_t Modulo(std::int64_t j, std::int64_t n) {
  const std::int64_t r = j % n;
  return r < 0 ? r + n : r;
}

}  // namespace tollgate::algorithms
