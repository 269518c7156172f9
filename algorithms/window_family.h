// Internal to decide.cc: the algorithms that count units in windows of
// time, fixed_window, sliding_log, sub_window and two_bucket, as defined in
// docs/algorithms.md. Pure functions, as decide.h.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "algorithms/family_common.h"
#include "algorithms/state.h"

namespace tollgate::algorithms::family {
// Internal linkage: the calls of decide.cc, the one includer, are inlined
// as if these were written in it.
namespace {

using std::int64_t;

// ---- fixed_window -------------------------------------------------------

int64_t FixedCount(const FixedWindowState& s, int64_t index) {
  return s.index == index ? s.count : 0;
}

int64_t FixedRetryAfter(const LimitParams& p, const FixedWindowState& s, int64_t now_ms,
                        int64_t cost) {
  const int64_t index = FloorDiv(now_ms, p.window_ms);
  if (FixedCount(s, index) + cost <= p.limit) return 0;
  return (index + 1) * p.window_ms - now_ms;
}

void FixedConsume(const LimitParams& p, FixedWindowState& s, int64_t now_ms, int64_t cost) {
  const int64_t index = FloorDiv(now_ms, p.window_ms);
  if (s.index != index) {
    s.index = index;
    s.count = 0;
  }
  s.count += cost;
}

Snapshot FixedPeek(const LimitParams& p, const FixedWindowState& s, int64_t now_ms) {
  const int64_t index = FloorDiv(now_ms, p.window_ms);
  // 0, not below, while a settle's charge counts above the limit.
  return {std::max<int64_t>(0, p.limit - FixedCount(s, index)), (index + 1) * p.window_ms - now_ms};
}

// ---- sliding_log --------------------------------------------------------

// The live part of a log, wherever it is kept: runs [head, end).
struct LogView {
  const SlidingLog::Run* runs;
  std::size_t head;
  std::size_t end;
  int64_t units;
};

LogView ViewLog(const SlidingLogState& s) {
  if (s.log == nullptr) return {&s.single, 0, s.single.count > 0 ? 1U : 0U, s.single.count};
  return {s.log->runs.data(), s.log->head, s.log->runs.size(), s.log->units};
}

// Units whose timestamp left the window (t - W, t], and the first live run.
struct Expiry {
  int64_t units;
  std::size_t first_live;
};

Expiry FindExpired(const LimitParams& p, const LogView& log, int64_t now_ms) {
  Expiry e{0, log.head};
  while (e.first_live < log.end && log.runs[e.first_live].ts <= now_ms - p.window_ms) {
    e.units += log.runs[e.first_live].count;
    ++e.first_live;
  }
  return e;
}

int64_t LogRetryAfter(const LimitParams& p, const LogView& log, int64_t now_ms, int64_t cost) {
  const Expiry expired = FindExpired(p, log, now_ms);
  const int64_t n = log.units - expired.units;
  if (n + cost <= p.limit) return 0;
  // log[k - 1], the k-th oldest kept unit, leaves the window at log[k-1] + W.
  const int64_t k = n + cost - p.limit;
  int64_t seen = 0;
  for (std::size_t i = expired.first_live; i < log.end; ++i) {
    seen += log.runs[i].count;
    if (seen >= k) return log.runs[i].ts + p.window_ms - now_ms;
  }
  return p.window_ms;  // unreachable: k <= n because cost <= L
}

void LogConsume(const LimitParams& p, SlidingLogState& s, int64_t now_ms, int64_t cost) {
  const LogView live = ViewLog(s);
  const Expiry expired = FindExpired(p, live, now_ms);
  if (expired.first_live == live.end) {
    // Nothing live: the log starts over inline.
    delete s.log;
    s = SlidingLogState{{now_ms, cost}, nullptr};
    return;
  }
  // A clock that steps back must not unsort the log: such a request is
  // recorded at the newest timestamp.
  if (s.log == nullptr) {
    if (s.single.ts >= now_ms) {
      s.single.count += cost;
      return;
    }
    s.log = new SlidingLog{{s.single}, 0, s.single.count};
    s.single = {0, 0};
  }
  SlidingLog& log = *s.log;
  log.units -= expired.units;
  log.head = expired.first_live;
  if (log.head >= 16 && log.head * 2 >= log.runs.size()) {
    log.runs.erase(log.runs.begin(), log.runs.begin() + static_cast<std::ptrdiff_t>(log.head));
    log.head = 0;
  }
  if (log.runs.back().ts >= now_ms) {
    log.runs.back().count += cost;
  } else {
    log.runs.push_back({now_ms, cost});
  }
  log.units += cost;
}

Snapshot LogPeek(const LimitParams& p, const LogView& log, int64_t now_ms) {
  const Expiry expired = FindExpired(p, log, now_ms);
  const int64_t n = log.units - expired.units;
  const int64_t reset = n > 0 ? log.runs[log.end - 1].ts + p.window_ms - now_ms : 0;
  return {p.limit - n, reset};
}

// ---- sub_window ---------------------------------------------------------

// Sub-window j is stored at j mod N while newest - N < j <= newest. Walks
// step a ring position instead of dividing per sub-window (a division costs
// as much as the rest of a decision).
template <typename Count>
struct SubWindowView {
  const LimitParams& p;
  std::int64_t& newest;  // SubWindowState::index
  Count* counts;         // N entries
  int64_t sub_ms() const { return p.window_ms / p.sub_windows; }
  // The stored sub-windows inside the window ending with `index`: [lo, hi].
  int64_t Low(int64_t index) const { return std::max(index, newest) - p.sub_windows + 1; }
  int64_t High(int64_t index) const { return std::min(index, newest); }
  int64_t Total(int64_t index) const {
    const int64_t lo = Low(index);
    const int64_t hi = High(index);
    int64_t total = 0;
    int64_t pos = lo <= hi ? Modulo(lo, p.sub_windows) : 0;
    for (int64_t j = lo; j <= hi; ++j) {
      total += counts[pos];
      if (++pos == p.sub_windows) pos = 0;
    }
    return total;
  }
  // Saturating: see SubWindowState.
  void Add(int64_t pos, int64_t cost) {
    counts[pos] = static_cast<Count>(
        std::min<int64_t>(int64_t{counts[pos]} + cost, std::numeric_limits<Count>::max()));
  }
};

template <typename Count>
SubWindowView<Count> ViewSubWindow(const LimitParams& p, std::byte* state) {
  return {p, As<SubWindowState>(state).index,
          reinterpret_cast<Count*>(state + sizeof(SubWindowState))};
}

// Calls f with the view of the state's count width.
template <typename F>
auto WithSubWindow(const LimitParams& p, std::byte* state, F&& f) {
  if (SubWindowCountBytes(p) == sizeof(std::uint16_t)) {
    SubWindowView<std::uint16_t> view = ViewSubWindow<std::uint16_t>(p, state);
    return f(view);
  }
  SubWindowView<std::uint32_t> view = ViewSubWindow<std::uint32_t>(p, state);
  return f(view);
}

template <typename Count>
int64_t SubRetryAfter(const SubWindowView<Count>& v, int64_t now_ms, int64_t cost) {
  const int64_t n = v.p.sub_windows;
  const int64_t sub_ms = v.sub_ms();
  const int64_t index = FloorDiv(now_ms, sub_ms);
  int64_t total = v.Total(index);
  if (total + cost <= v.p.limit) return 0;
  // Sub-window j leaves the window at (j + N) * S; walk the oldest first.
  const int64_t lo = v.Low(index);
  const int64_t hi = v.High(index);
  int64_t pos = Modulo(lo, n);
  for (int64_t j = lo; j <= hi; ++j) {
    total -= v.counts[pos];
    if (++pos == n) pos = 0;
    if (total <= v.p.limit - cost) return (j + n) * sub_ms - now_ms;
  }
  return (index + n) * sub_ms - now_ms;  // unreachable: cost <= L
}

template <typename Count>
void SubConsume(SubWindowView<Count>& v, int64_t now_ms, int64_t cost) {
  const int64_t n = v.p.sub_windows;
  const int64_t index = FloorDiv(now_ms, v.sub_ms());
  if (index > v.newest) {
    const int64_t first_stale = std::max(v.newest + 1, index - n + 1);
    int64_t pos = Modulo(first_stale, n);
    for (int64_t j = first_stale; j <= index; ++j) {
      v.counts[pos] = 0;
      if (++pos == n) pos = 0;
    }
    v.newest = index;
  }
  // A clock that steps back counts into the newest sub-window.
  v.Add(Modulo(v.newest, n), cost);
}

template <typename Count>
Snapshot SubPeek(const SubWindowView<Count>& v, int64_t now_ms) {
  const int64_t n = v.p.sub_windows;
  const int64_t sub_ms = v.sub_ms();
  const int64_t index = FloorDiv(now_ms, sub_ms);
  const int64_t lo = v.Low(index);
  const int64_t hi = v.High(index);
  int64_t total = 0;
  int64_t newest_used = lo - 1;
  int64_t pos = lo <= hi ? Modulo(lo, n) : 0;
  for (int64_t j = lo; j <= hi; ++j) {
    if (v.counts[pos] > 0) {
      total += v.counts[pos];
      newest_used = j;
    }
    if (++pos == n) pos = 0;
  }
  const int64_t reset = newest_used >= lo ? (newest_used + n) * sub_ms - now_ms : 0;
  return {std::max<int64_t>(0, v.p.limit - total), reset};
}

// The single-window decision in one pass (three divisions instead of ten).
// Advancing the ring to `index` first is no change of meaning: it only drops
// sub-windows that already left the window. A clock that stepped back takes
// the general path.
template <typename Count>
bool SubDecideFused(SubWindowView<Count>& v, int64_t now_ms, int64_t cost, Decision& d) {
  const LimitParams& p = v.p;
  const int64_t n = p.sub_windows;
  const int64_t sub_ms = p.window_ms / n;
  const int64_t index = FloorDiv(now_ms, sub_ms);
  if (index < v.newest) return false;
  const int64_t newest_pos = Modulo(index, n);
  if (index > v.newest) {
    const int64_t stale = std::min(index - v.newest, n);
    int64_t pos = newest_pos;
    for (int64_t k = 0; k < stale; ++k) {
      v.counts[pos] = 0;
      pos = pos == 0 ? n - 1 : pos - 1;
    }
    v.newest = index;
  }
  // The ring now holds exactly the window (index - N, index].
  int64_t total = 0;
  for (int64_t pos = 0; pos < n; ++pos) total += v.counts[pos];
  d.allowed = total + cost <= p.limit;
  if (d.allowed) {
    v.Add(newest_pos, cost);
    total += cost;
  } else {
    int64_t after = total;
    int64_t pos = newest_pos + 1 == n ? 0 : newest_pos + 1;
    for (int64_t j = index - n + 1; j <= index; ++j) {
      after -= v.counts[pos];
      if (++pos == n) pos = 0;
      if (after <= p.limit - cost) {
        d.retry_after_ms = (j + n) * sub_ms - now_ms;
        break;
      }
    }
  }
  d.remaining = std::max<int64_t>(0, p.limit - total);
  d.window = 0;
  int64_t pos = newest_pos;
  for (int64_t j = index; j > index - n; --j) {
    if (v.counts[pos] > 0) {
      d.reset_ms = (j + n) * sub_ms - now_ms;
      break;
    }
    pos = pos == 0 ? n - 1 : pos - 1;
  }
  d.window_reset_ms = d.reset_ms;
  return true;
}

// ---- two_bucket ---------------------------------------------------------

struct TwoCounts {
  int64_t index;
  int64_t elapsed;  // e = t - index * W
  int64_t curr;
  int64_t prev;
};

TwoCounts CarryForward(const LimitParams& p, const TwoBucketState& s, int64_t now_ms) {
  const int64_t index = FloorDiv(now_ms, p.window_ms);
  TwoCounts c{index, now_ms - index * p.window_ms, 0, 0};
  if (s.index == index) {
    c.curr = s.curr;
    c.prev = s.prev;
  } else if (s.index == index - 1) {
    c.prev = s.curr;
  }
  return c;
}

bool TwoAllows(const LimitParams& p, const TwoCounts& c, int64_t cost) {
  const int64_t w = p.window_ms;
  return (c.curr + cost) * w + c.prev * (w - c.elapsed) <= p.limit * w;
}

// Closed form of the smallest d >= 1 with TwoAllows at t + d (nothing else
// arriving): first later in this window, else in the next, else the one after.
int64_t TwoRetryAfter(const LimitParams& p, const TwoBucketState& s, int64_t now_ms, int64_t cost) {
  const TwoCounts c = CarryForward(p, s, now_ms);
  if (TwoAllows(p, c, cost)) return 0;
  const int64_t w = p.window_ms;
  const int64_t to_boundary = w - c.elapsed;
  const int64_t slack = p.limit * w - (c.curr + cost) * w;
  if (slack >= 0 && c.prev > 0) {
    // prev * (W - e - d) <= slack
    const int64_t d = std::max<int64_t>(1, to_boundary - slack / c.prev);
    if (d < to_boundary) return d;
  }
  // Next window: prev' = curr, curr' = 0; need curr * (W - e') <= (L - c) * W.
  if (c.curr == 0) return to_boundary;
  const int64_t e_next = std::max<int64_t>(0, w - (p.limit - cost) * w / c.curr);
  if (e_next < w) return to_boundary + e_next;
  return to_boundary + w;
}

void TwoConsume(const LimitParams& p, TwoBucketState& s, int64_t now_ms, int64_t cost) {
  const TwoCounts c = CarryForward(p, s, now_ms);
  if (c.index > s.index) {
    s = TwoBucketState{c.index, c.curr, c.prev};
  }
  s.curr += cost;
}

Snapshot TwoPeek(const LimitParams& p, const TwoBucketState& s, int64_t now_ms) {
  const TwoCounts c = CarryForward(p, s, now_ms);
  const int64_t w = p.window_ms;
  const int64_t remaining =
      std::max<int64_t>(0, FloorDiv(p.limit * w - c.prev * (w - c.elapsed), w) - c.curr);
  int64_t reset = 0;
  if (c.curr > 0) {
    reset = (c.index + 2) * w - now_ms;
  } else if (c.prev > 0) {
    reset = (c.index + 1) * w - now_ms;
  }
  return {remaining, reset};
}

}  // namespace
}  // namespace tollgate::algorithms::family
