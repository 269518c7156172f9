#include "algorithms/decide.h"

#include <algorithm>
#include <limits>

#include "algorithms/bucket_family.h"
#include "algorithms/state.h"
#include "algorithms/validate.h"
#include "algorithms/window_family.h"

namespace tollgate::algorithms {
namespace {

using std::int64_t;
using family::FixedCount;
using family::Snapshot;
using family::TokenLevel;
using family::TokenRetryAfter;
using family::TokenConsume;
using family::TokenPeek;
using family::TokenDecideFused;
using family::LeakyLevel;
using family::LeakyRetryAfter;
using family::LeakyConsume;
using family::LeakyPeek;
using family::FixedRetryAfter;
using family::FixedConsume;
using family::FixedPeek;
using family::ViewLog;
using family::LogRetryAfter;
using family::LogConsume;
using family::LogPeek;
using family::WithSubWindow;
using family::SubRetryAfter;
using family::SubConsume;
using family::SubPeek;
using family::SubDecideFused;
using family::TwoCounts;
using family::CarryForward;
using family::TwoRetryAfter;
using family::TwoConsume;
using family::TwoPeek;

// ---- dispatch -----------------------------------------------------------

// Returns delay_ms.
int64_t Consume(const LimitParams& p, std::byte* state, int64_t now_ms, int64_t cost) {
  switch (p.algorithm) {
    case Algorithm::kTokenBucket:
      TokenConsume(p, As<BucketState>(state), now_ms, cost);
      return 0;
    case Algorithm::kLeakyBucket:
      return LeakyConsume(p, As<BucketState>(state), now_ms, cost);
    case Algorithm::kFixedWindow:
      FixedConsume(p, As<FixedWindowState>(state), now_ms, cost);
      return 0;
    case Algorithm::kSlidingLog:
      LogConsume(p, As<SlidingLogState>(state), now_ms, cost);
      return 0;
    case Algorithm::kSubWindow:
      WithSubWindow(p, state, [&](auto& v) { SubConsume(v, now_ms, cost); });
      return 0;
    case Algorithm::kTwoBucket:
      TwoConsume(p, As<TwoBucketState>(state), now_ms, cost);
      return 0;
  }
  return 0;
}

Snapshot Peek(const LimitParams& p, std::byte* state, int64_t now_ms) {
  switch (p.algorithm) {
    case Algorithm::kTokenBucket:
      return TokenPeek(p, As<BucketState>(state), now_ms);
    case Algorithm::kLeakyBucket:
      return LeakyPeek(p, As<BucketState>(state), now_ms);
    case Algorithm::kFixedWindow:
      return FixedPeek(p, As<FixedWindowState>(state), now_ms);
    case Algorithm::kSlidingLog:
      return LogPeek(p, ViewLog(As<SlidingLogState>(state)), now_ms);
    case Algorithm::kSubWindow:
      return WithSubWindow(p, state, [&](auto& v) { return SubPeek(v, now_ms); });
    case Algorithm::kTwoBucket:
      return TwoPeek(p, As<TwoBucketState>(state), now_ms);
  }
  return {0, 0};
}

}  // namespace

bool ExceedsCapacity(std::span<const LimitParams> windows, int64_t cost) {
  return std::any_of(windows.begin(), windows.end(),
                     [cost](const LimitParams& w) { return cost > Capacity(w); });
}

Decision NeverPasses(std::span<const LimitParams> windows) {
  Decision d;
  for (const LimitParams& w : windows) d.reset_ms = std::max(d.reset_ms, w.window_ms);
  d.retry_after_ms = d.reset_ms;
  d.window_reset_ms = windows.front().window_ms;
  return d;
}

Decision Decide(std::span<const LimitParams> windows, std::span<std::byte* const> states,
                int64_t now_ms, int64_t cost) {
  if (ExceedsCapacity(windows, cost)) return NeverPasses(windows);
  if (windows.size() == 1 && windows[0].algorithm == Algorithm::kTokenBucket) {
    return TokenDecideFused(windows[0], As<BucketState>(states[0]), now_ms, cost);
  }
  Decision d;
  if (windows.size() == 1 && windows[0].algorithm == Algorithm::kSubWindow &&
      WithSubWindow(windows[0], states[0],
                    [&](auto& v) { return SubDecideFused(v, now_ms, cost, d); })) {
    return d;
  }
  for (std::size_t i = 0; i < windows.size(); ++i) {
    d.retry_after_ms = std::max(d.retry_after_ms, RetryAfter(windows[i], states[i], now_ms, cost));
  }
  d.allowed = d.retry_after_ms == 0;
  if (d.allowed) {
    for (std::size_t i = 0; i < windows.size(); ++i) {
      d.delay_ms = std::max(d.delay_ms, Consume(windows[i], states[i], now_ms, cost));
    }
  }
  d.remaining = std::numeric_limits<int64_t>::max();
  for (std::size_t i = 0; i < windows.size(); ++i) {
    const Snapshot s = Peek(windows[i], states[i], now_ms);
    if (s.remaining < d.remaining) {
      d.remaining = s.remaining;
      d.window = static_cast<std::uint8_t>(i);
      d.window_reset_ms = s.reset_ms;
    }
    d.reset_ms = std::max(d.reset_ms, s.reset_ms);
  }
  return d;
}

Decision Decide(const LimitParams& window, std::byte* state, int64_t now_ms, int64_t cost) {
  return Decide(std::span<const LimitParams>(&window, 1), std::span<std::byte* const>(&state, 1),
                now_ms, cost);
}

int64_t RetryAfter(const LimitParams& p, std::byte* state, int64_t now_ms, int64_t cost) {
  switch (p.algorithm) {
    case Algorithm::kTokenBucket:
      return TokenRetryAfter(p, As<BucketState>(state), now_ms, cost);
    case Algorithm::kLeakyBucket:
      return LeakyRetryAfter(p, As<BucketState>(state), now_ms, cost);
    case Algorithm::kFixedWindow:
      return FixedRetryAfter(p, As<FixedWindowState>(state), now_ms, cost);
    case Algorithm::kSlidingLog:
      return LogRetryAfter(p, ViewLog(As<SlidingLogState>(state)), now_ms, cost);
    case Algorithm::kSubWindow:
      return WithSubWindow(p, state, [&](auto& v) { return SubRetryAfter(v, now_ms, cost); });
    case Algorithm::kTwoBucket:
      return TwoRetryAfter(p, As<TwoBucketState>(state), now_ms, cost);
  }
  return 0;
}

WindowView Inspect(const LimitParams& window, std::byte* state, int64_t now_ms) {
  const Snapshot s = Peek(window, state, now_ms);
  WindowView view{s.remaining, s.reset_ms, RetryAfter(window, state, now_ms, 1)};
  switch (window.algorithm) {
    case Algorithm::kTokenBucket:
      view.level = TokenLevel(window, As<BucketState>(state), now_ms);
      break;
    case Algorithm::kLeakyBucket:
      view.level = LeakyLevel(window, As<BucketState>(state), now_ms);
      break;
    case Algorithm::kTwoBucket: {
      const TwoCounts c = CarryForward(window, As<TwoBucketState>(state), now_ms);
      view.level = c.curr;
      view.previous = c.prev;
      break;
    }
    case Algorithm::kFixedWindow:
      view.level = FixedCount(As<FixedWindowState>(state), FloorDiv(now_ms, window.window_ms));
      break;
    case Algorithm::kSubWindow:
      view.level = WithSubWindow(window, state,
                                 [&](auto& v) { return v.Total(FloorDiv(now_ms, v.sub_ms())); });
      break;
    case Algorithm::kSlidingLog:
      // Its remaining is exactly the limit less what the window counts.
      view.level = window.limit - s.remaining;
      break;
  }
  return view;
}

}  // namespace tollgate::algorithms
