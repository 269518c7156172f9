#include "algorithms/lease.h"

#include <algorithm>
#include <tuple>

#include "algorithms/decide.h"
#include "algorithms/integer.h"
#include "algorithms/state.h"

namespace tollgate::algorithms {
namespace {

using std::int64_t;

bool IsBucket(const LimitParams& p) {
  return p.algorithm == Algorithm::kTokenBucket || p.algorithm == Algorithm::kLeakyBucket;
}

// ---- token_bucket, policing leaky_bucket (lease.lua's LEASE.bucket) -------

// A policing leaky bucket of queue B allows what a token bucket of B + 1 does.
int64_t Capacity(const LimitParams& p) {
  return p.algorithm == Algorithm::kLeakyBucket ? p.burst + 1 : p.burst;
}

int64_t Elapsed(const LimitParams& p, int64_t last_ms, int64_t now_ms) {
  const int64_t cap = CeilDiv((Capacity(p) + 1) * p.window_ms, p.limit) + 1;
  return std::clamp<int64_t>(now_ms - last_ms, 0, cap);
}

void Refill(const LimitParams& p, BucketLeaseState& s, int64_t to_ms) {
  s.level = std::min(Capacity(p) * p.window_ms, s.level + Elapsed(p, s.last_ms, to_ms) * p.limit);
  s.last_ms = std::max(s.last_ms, to_ms);
}

// Brings the state to now: expired leases count as spent. Returns the
// units still leased.
int64_t BucketLoad(const LimitParams& p, BucketLeaseState& s, int64_t now_ms) {
  int64_t outstanding = 0;
  std::vector<Lease> kept;
  for (const Lease& l : s.leases) {
    if (l.expiry_ms <= now_ms) {
      Refill(p, s, l.expiry_ms);
      s.level -= l.units * p.window_ms;
    } else {
      kept.push_back(l);
      outstanding += l.units;
    }
  }
  s.leases = std::move(kept);
  Refill(p, s, now_ms);
  return outstanding;
}

// Units available (at least 0), and when fewer than `need`, the wait for
// `need`: the refill, or, while leases hold too much of the capacity, the
// earliest one's expiry.
std::pair<int64_t, int64_t> BucketAvail(const LimitParams& p, const BucketLeaseState& s,
                                        int64_t outstanding, int64_t now_ms, int64_t need) {
  const int64_t avail =
      std::max<int64_t>(0, FloorDiv(s.level - outstanding * p.window_ms, p.window_ms));
  if (avail >= need) return {avail, 0};
  if (outstanding + need <= Capacity(p) || s.leases.empty()) {
    return {avail, CeilDiv((outstanding + need) * p.window_ms - s.level, p.limit)};
  }
  return {avail, s.leases.front().expiry_ms - now_ms};
}

int64_t BucketTake(BucketLeaseState& s, int64_t now_ms, int64_t units, int64_t hold_ms) {
  const Lease l{s.next_id, units, now_ms + hold_ms};
  auto at = s.leases.end();
  while (at != s.leases.begin() && (at - 1)->expiry_ms > l.expiry_ms) --at;
  s.leases.insert(at, l);
  ++s.next_id;
  return l.id;
}

int64_t BucketGiveBack(const LimitParams& p, BucketLeaseState& s, int64_t stamp, int64_t used,
                       int64_t unused) {
  for (auto it = s.leases.begin(); it != s.leases.end(); ++it) {
    if (it->id == stamp) {
      s.level -= used * p.window_ms;
      s.leases.erase(it);
      return unused;
    }
  }
  return 0;
}

// ---- sliding_log (LEASE.log) ----------------------------------------------

// Drops the runs that left the window (t - W, t].
void LogPurge(const LimitParams& p, LogLeaseState& runs, int64_t now_ms) {
  auto live = runs.begin();
  while (live != runs.end() && live->ts <= now_ms - p.window_ms) ++live;
  runs.erase(runs.begin(), live);
}

// Units available (at least 0), and when fewer than `need`, the wait until
// the counted unit that makes room for `need` leaves the window. Records
// of outstanding leases, stamped in the future, count like any other.
std::pair<int64_t, int64_t> LogAvail(const LimitParams& p, const LogLeaseState& runs,
                                     int64_t now_ms, int64_t need) {
  int64_t n = 0;
  for (const SlidingLog::Run& r : runs) n += r.count;
  const int64_t avail = std::max<int64_t>(0, p.limit - n);
  if (avail >= need) return {avail, 0};
  const int64_t k = n + need - p.limit;
  int64_t seen = 0;
  for (const SlidingLog::Run& r : runs) {
    seen += r.count;
    if (seen >= k) return {avail, r.ts + p.window_ms - now_ms};
  }
  return {avail, p.window_ms};  // a cost above the limit: never
}

// Records `units` slots at the lease's latest moment of use (now + hold,
// or the newest record if the clock stepped back); returns that time, the
// stamp a return finds them by.
int64_t LogTake(LogLeaseState& runs, int64_t now_ms, int64_t units, int64_t hold_ms) {
  const int64_t at = now_ms + hold_ms;
  if (!runs.empty() && runs.back().ts >= at) {
    runs.back().count += units;
    return runs.back().ts;
  }
  runs.push_back({at, units});
  return at;
}

// Adds `count` slots at `ts` to the sorted runs.
void LogInsert(LogLeaseState& runs, int64_t ts, int64_t count) {
  auto at = std::lower_bound(runs.begin(), runs.end(), ts,
                             [](const SlidingLog::Run& r, int64_t t) { return r.ts < t; });
  if (at != runs.end() && at->ts == ts) {
    at->count += count;
  } else {
    runs.insert(at, {ts, count});
  }
}

// Removes up to `unused` slots recorded at `stamp`, if still there, and
// moves the `used` ones to their admission times `used_at` (capped at the
// stamp; those that left the window (now - W, now] are dropped) when all
// of them are known and still there; otherwise they stay at the stamp.
int64_t LogGiveBack(const LimitParams& p, LogLeaseState& runs, int64_t now_ms, int64_t stamp,
                    int64_t used, int64_t unused, std::span<const SlidingLog::Run> used_at) {
  auto it = runs.rbegin();
  while (it != runs.rend() && it->ts > stamp) ++it;
  if (it == runs.rend() || it->ts != stamp) return 0;
  const int64_t back = std::min(unused, it->count);
  int64_t known = 0;
  for (const SlidingLog::Run& r : used_at) known += r.count;
  const bool rewrite = used > 0 && known == used && it->count >= used + unused;
  it->count -= rewrite ? used + unused : back;
  if (it->count == 0) runs.erase(std::next(it).base());
  if (rewrite) {
    for (const SlidingLog::Run& r : used_at) {
      const int64_t ts = std::min(r.ts, stamp);
      if (ts > now_ms - p.window_ms) LogInsert(runs, ts, r.count);
    }
  }
  return back;
}

// ---- fixed_window, sub_window, two_bucket (LEASE.window) ------------------

template <typename Count>
int64_t SubGiveBack(const LimitParams& p, std::byte* state, int64_t stamp, int64_t unused) {
  const int64_t newest = As<SubWindowState>(state).index;
  if (stamp <= newest - p.sub_windows || stamp > newest) return 0;
  Count* counts = reinterpret_cast<Count*>(state + sizeof(SubWindowState));
  Count& count = counts[Modulo(stamp, p.sub_windows)];
  const int64_t back = std::min<int64_t>(unused, count);
  count = static_cast<Count>(count - back);
  return back;
}

// The stamp of the bucket a take counted into, and how long it stays current.
std::pair<int64_t, int64_t> WindowStamp(const LimitParams& p, std::byte* state, int64_t now_ms) {
  switch (p.algorithm) {
    case Algorithm::kFixedWindow: {
      const int64_t index = As<FixedWindowState>(state).index;
      return {index, (index + 1) * p.window_ms - now_ms};
    }
    case Algorithm::kTwoBucket: {
      const int64_t index = As<TwoBucketState>(state).index;
      return {index, (index + 1) * p.window_ms - now_ms};
    }
    default: {
      const int64_t newest = As<SubWindowState>(state).index;
      return {newest, (newest + 1) * (p.window_ms / p.sub_windows) - now_ms};
    }
  }
}

int64_t WindowGiveBack(const LimitParams& p, std::byte* state, int64_t stamp, int64_t unused) {
  switch (p.algorithm) {
    case Algorithm::kFixedWindow: {
      FixedWindowState& s = As<FixedWindowState>(state);
      if (s.index != stamp) return 0;
      const int64_t back = std::min(unused, s.count);
      s.count -= back;
      return back;
    }
    case Algorithm::kTwoBucket: {
      TwoBucketState& s = As<TwoBucketState>(state);
      int64_t* count = s.index == stamp ? &s.curr : s.index - 1 == stamp ? &s.prev : nullptr;
      if (count == nullptr) return 0;
      const int64_t back = std::min(unused, *count);
      *count -= back;
      return back;
    }
    default:
      return SubWindowCountBytes(p) == sizeof(std::uint16_t)
                 ? SubGiveBack<std::uint16_t>(p, state, stamp, unused)
                 : SubGiveBack<std::uint32_t>(p, state, stamp, unused);
  }
}

}  // namespace

bool HasBucketLease(std::span<const LimitParams> windows) {
  return std::any_of(windows.begin(), windows.end(), IsBucket);
}

bool HasLogLease(std::span<const LimitParams> windows) {
  return std::any_of(windows.begin(), windows.end(),
                     [](const LimitParams& p) { return p.algorithm == Algorithm::kSlidingLog; });
}

std::int64_t SmallestLimit(std::span<const LimitParams> windows) {
  std::int64_t smallest = windows.front().limit;
  for (const LimitParams& p : windows) smallest = std::min(smallest, p.limit);
  return smallest;
}

std::string_view LeaseRefusal(const LimitParams& window) {
  if (window.algorithm == Algorithm::kLeakyBucket && window.shaping == Shaping::kDelay) {
    return "sync = \"lease\" needs nodelay = true with leaky_bucket: a shaping queue's order "
           "cannot be kept for units another gateway holds";
  }
  return {};
}

LeaseState::LeaseState(std::span<const LimitParams> windows, int64_t now_ms)
    : windows_(windows.begin(), windows.end()), decision_(windows, now_ms) {
  for (const LimitParams& p : windows_) {
    buckets_.push_back({Capacity(p) * p.window_ms, now_ms, 1, {}});
  }
  logs_.resize(windows_.size());
}

LeaseGrant LeaseState::Take(int64_t now_ms, int64_t want, int64_t use_ms, int64_t hold_ms,
                            TakeUse use) {
  const std::size_t n = windows_.size();
  std::vector<int64_t> outstanding(n, 0);
  // A spent take is all or none (its units are one request's cost): it
  // needs `want`, a lease at least one.
  const int64_t need = use == TakeUse::kSpent ? want : 1;
  int64_t g = want;
  int64_t retry = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const LimitParams& p = windows_[i];
    int64_t avail = 0;
    int64_t wait = 0;
    if (IsBucket(p)) {
      outstanding[i] = BucketLoad(p, buckets_[i], now_ms);
      std::tie(avail, wait) = BucketAvail(p, buckets_[i], outstanding[i], now_ms, need);
    } else if (p.algorithm == Algorithm::kSlidingLog) {
      LogPurge(p, logs_[i], now_ms);
      std::tie(avail, wait) = LogAvail(p, logs_[i], now_ms, need);
    } else {
      std::byte* state = decision_.windows()[i];
      avail = std::max<int64_t>(0, Inspect(p, state, now_ms).remaining);
      if (avail < need) wait = RetryAfter(p, state, now_ms, need);
    }
    g = std::min(g, avail);
    if (avail < need) retry = std::max(retry, wait);
  }
  LeaseGrant grant;
  if (g < need) {
    grant.retry_after_ms = std::max<int64_t>(retry, 1);
    return grant;
  }
  grant.units = g;
  if (use == TakeUse::kSpent) {
    // As a lease taken and returned at once with its g units used at now.
    for (std::size_t i = 0; i < n; ++i) {
      const LimitParams& p = windows_[i];
      if (IsBucket(p)) {
        buckets_[i].level -= g * p.window_ms;
      } else if (p.algorithm == Algorithm::kSlidingLog) {
        LogTake(logs_[i], now_ms, g, 0);
      } else {
        Decide(p, decision_.windows()[i], now_ms, g);
      }
    }
    return grant;
  }
  grant.valid_ms = use_ms;
  for (std::size_t i = 0; i < n; ++i) {
    const LimitParams& p = windows_[i];
    if (IsBucket(p)) {
      grant.stamps.push_back(BucketTake(buckets_[i], now_ms, g, hold_ms));
      continue;
    }
    if (p.algorithm == Algorithm::kSlidingLog) {
      grant.stamps.push_back(LogTake(logs_[i], now_ms, g, hold_ms));
      continue;
    }
    std::byte* state = decision_.windows()[i];
    Decide(p, state, now_ms, g);
    const auto [stamp, valid] = WindowStamp(p, state, now_ms);
    grant.stamps.push_back(stamp);
    grant.valid_ms = std::min(grant.valid_ms, valid);
  }
  return grant;
}

int64_t LeaseState::Return(int64_t now_ms, std::span<const int64_t> stamps, int64_t used,
                           int64_t unused, std::span<const SlidingLog::Run> used_at) {
  int64_t back = unused;
  for (std::size_t i = 0; i < windows_.size(); ++i) {
    const LimitParams& p = windows_[i];
    int64_t given = 0;
    if (IsBucket(p)) {
      BucketLoad(p, buckets_[i], now_ms);
      given = BucketGiveBack(p, buckets_[i], stamps[i], used, unused);
    } else if (p.algorithm == Algorithm::kSlidingLog) {
      LogPurge(p, logs_[i], now_ms);
      given = LogGiveBack(p, logs_[i], now_ms, stamps[i], used, unused, used_at);
    } else {
      given = WindowGiveBack(p, decision_.windows()[i], stamps[i], unused);
    }
    back = std::min(back, given);
  }
  return back;
}

}  // namespace tollgate::algorithms
