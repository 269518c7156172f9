#include "algorithms/settle.h"

#include <algorithm>
#include <limits>

#include "algorithms/decide.h"
#include "algorithms/integer.h"
#include "algorithms/state.h"
#include "algorithms/validate.h"

namespace tollgate::algorithms {
namespace {

using std::int64_t;

// Which algorithms settle, by Algorithm (the order of TOLLGATE_ALGORITHMS).
constexpr bool kCanSettle[] = {
    true,   // token_bucket
    true,   // leaky_bucket
    true,   // fixed_window
    false,  // sliding_log: a settle would need the entries of one request
    true,   // sub_window
    true,   // two_bucket
};
static_assert(std::size(kCanSettle) == kAlgorithmCount);

// The difference to settle, `actual - reserved`, as a refund (> 0 when
// actual < reserved) and a charge (> 0 when actual > reserved), each first
// bounded by twice the capacity: no window keeps more than one capacity of
// debt, and the bound keeps refund * W and charge * W below 2^51 (a refund
// within the preconditions is at most one capacity anyway).
struct Difference {
  int64_t refund;
  int64_t charge;
};

Difference Split(const LimitParams& p, int64_t reserved, int64_t actual) {
  if (actual <= reserved) return {std::min(reserved - actual, 2 * Capacity(p)), 0};
  return {0, std::min(actual - reserved, 2 * Capacity(p))};
}

// A count charged `charge` more, at most `most` (never below what it was).
int64_t ChargeTo(int64_t count, int64_t charge, int64_t most) {
  return count + std::min(charge, std::max<int64_t>(0, most - count));
}

// ---- buckets ------------------------------------------------------------

void TokenSettle(const LimitParams& p, std::byte* state, int64_t now_ms, Difference d) {
  const int64_t full = p.burst * p.window_ms;
  int64_t level = Inspect(p, state, now_ms).level;
  if (d.refund > 0) level = std::min(full, level + d.refund * p.window_ms);
  if (d.charge > 0) level = std::max(-full, level - d.charge * p.window_ms);
  BucketState& s = As<BucketState>(state);
  s.level = level;
  s.last_ms = std::max(s.last_ms, now_ms);
}

void LeakySettle(const LimitParams& p, std::byte* state, int64_t now_ms, Difference d) {
  const int64_t most = 2 * (p.burst + 1) * p.window_ms;
  int64_t level = Inspect(p, state, now_ms).level;
  if (d.refund > 0) level = std::max<int64_t>(0, level - d.refund * p.window_ms);
  if (d.charge > 0) level = std::min(most, level + d.charge * p.window_ms);
  BucketState& s = As<BucketState>(state);
  s.level = level;
  s.last_ms = std::max(s.last_ms, now_ms);
}

// ---- windows ------------------------------------------------------------

void FixedSettle(const LimitParams& p, FixedWindowState& s, int64_t reserved_at_ms, int64_t now_ms,
                 Difference d) {
  const int64_t index = FloorDiv(now_ms, p.window_ms);
  const bool counted = s.index == index && FloorDiv(reserved_at_ms, p.window_ms) == index;
  if (d.refund > 0 && counted) s.count -= std::min(s.count, d.refund);
  if (d.charge > 0) {
    // Charged to the current window, the reservation's or a later one.
    if (s.index != index) s = FixedWindowState{index, 0};
    s.count = ChargeTo(s.count, d.charge, 2 * p.limit);
  }
}

template <typename Count>
void SubSettle(const LimitParams& p, std::byte* state, int64_t reserved_at_ms, int64_t now_ms,
               Difference d) {
  const int64_t n = p.sub_windows;
  const int64_t sub_ms = p.window_ms / n;
  const int64_t index = FloorDiv(now_ms, sub_ms);
  const int64_t reserved_in = FloorDiv(reserved_at_ms, sub_ms);
  int64_t& newest = As<SubWindowState>(state).index;
  Count* counts = reinterpret_cast<Count*>(state + sizeof(SubWindowState));
  if (d.refund > 0) {
    const bool counted = reserved_in > std::max(index, newest) - n && reserved_in <= newest;
    Count& count = counts[Modulo(reserved_in, n)];
    if (counted) count = static_cast<Count>(count - std::min<int64_t>(count, d.refund));
    return;
  }
  if (d.charge == 0) return;
  // Moving the ring to `index` first only drops sub-windows that left the
  // window (as a decision does).
  if (index > newest) {
    for (int64_t j = std::max(newest + 1, index - n + 1); j <= index; ++j) {
      counts[Modulo(j, n)] = 0;
    }
    newest = index;
  }
  const bool counted = reserved_in > newest - n && reserved_in <= newest;
  int64_t total = 0;
  for (int64_t j = 0; j < n; ++j) total += counts[j];
  Count& count = counts[Modulo(counted ? reserved_in : newest, n)];
  const int64_t add = std::min(d.charge, std::max<int64_t>(0, 2 * p.limit - total));
  // Saturating, as SubWindowState says.
  count = static_cast<Count>(
      std::min<int64_t>(int64_t{count} + add, std::numeric_limits<Count>::max()));
}

void TwoSettle(const LimitParams& p, TwoBucketState& s, int64_t reserved_at_ms, int64_t now_ms,
               Difference d) {
  const int64_t index = FloorDiv(now_ms, p.window_ms);
  if (index > s.index) {
    // Carried forward as a decision does: no change of meaning.
    const int64_t curr = s.index == index - 1 ? s.curr : 0;
    s = TwoBucketState{index, 0, curr};
  }
  const int64_t reserved_in = FloorDiv(reserved_at_ms, p.window_ms);
  int64_t* count = nullptr;
  if (reserved_in == s.index) count = &s.curr;
  if (reserved_in == s.index - 1) count = &s.prev;
  if (d.refund > 0 && count != nullptr) *count -= std::min(*count, d.refund);
  if (d.charge > 0) {
    if (count == nullptr) count = &s.curr;
    *count = ChargeTo(*count, d.charge, 2 * p.limit);
  }
}

void SettleWindow(const LimitParams& p, std::byte* state, int64_t reserved_at_ms, int64_t now_ms,
                  Difference d) {
  switch (p.algorithm) {
    case Algorithm::kTokenBucket:
      TokenSettle(p, state, now_ms, d);
      return;
    case Algorithm::kLeakyBucket:
      LeakySettle(p, state, now_ms, d);
      return;
    case Algorithm::kFixedWindow:
      FixedSettle(p, As<FixedWindowState>(state), reserved_at_ms, now_ms, d);
      return;
    case Algorithm::kSlidingLog:
      return;  // CanSettle() is false: a precondition
    case Algorithm::kSubWindow:
      if (SubWindowCountBytes(p) == sizeof(std::uint16_t)) {
        SubSettle<std::uint16_t>(p, state, reserved_at_ms, now_ms, d);
      } else {
        SubSettle<std::uint32_t>(p, state, reserved_at_ms, now_ms, d);
      }
      return;
    case Algorithm::kTwoBucket:
      TwoSettle(p, As<TwoBucketState>(state), reserved_at_ms, now_ms, d);
      return;
  }
}

}  // namespace

bool CanSettle(Algorithm algorithm) { return kCanSettle[static_cast<int>(algorithm)]; }

Decision Settle(std::span<const LimitParams> windows, std::span<std::byte* const> states,
                int64_t reserved_at_ms, int64_t now_ms, int64_t reserved, int64_t actual) {
  Decision out;
  out.remaining = std::numeric_limits<int64_t>::max();
  for (std::size_t i = 0; i < windows.size(); ++i) {
    SettleWindow(windows[i], states[i], reserved_at_ms, now_ms,
                 Split(windows[i], reserved, actual));
    const WindowView view = Inspect(windows[i], states[i], now_ms);
    if (view.remaining < out.remaining) {
      out.remaining = view.remaining;
      out.window = static_cast<std::uint8_t>(i);
      out.window_reset_ms = view.reset_ms;
    }
    out.reset_ms = std::max(out.reset_ms, view.reset_ms);
    out.retry_after_ms = std::max(out.retry_after_ms, view.retry_after_ms);
  }
  out.allowed = out.retry_after_ms == 0;
  return out;
}

Decision Settle(const LimitParams& window, std::byte* state, int64_t reserved_at_ms, int64_t now_ms,
                int64_t reserved, int64_t actual) {
  return Settle(std::span<const LimitParams>(&window, 1), std::span<std::byte* const>(&state, 1),
                reserved_at_ms, now_ms, reserved, actual);
}

}  // namespace tollgate::algorithms
