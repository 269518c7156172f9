// Leases: slices of a key's budget withdrawn from the shared state before
// any of their units is admitted (docs/leases.md). The C++ text of
// store/lua/lease/, which the Redis store runs; tests compare the two, and
// `tollgate replay --sync lease` simulates a fleet with it. Pure integer
// functions of the state and the time; no I/O, clock or locks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "algorithms/limit.h"
#include "algorithms/state.h"

namespace tollgate::algorithms {

// Whether a window of these parameters can be leased: every algorithm but
// leaky_bucket that shapes (its queue order cannot be kept across
// gateways). nullopt-like: empty string when it can, else the reason, for
// the config loader.
std::string_view LeaseRefusal(const LimitParams& window);

// One outstanding lease of a bucket window: `units` withdrawn, counted as
// spent at `expiry_ms` unless returned before.
struct Lease {
  std::int64_t id;
  std::int64_t units;
  std::int64_t expiry_ms;
};

// The lease state of a token_bucket (or policing leaky_bucket) window.
// `level` counts the leased units too (units of W per token).
struct BucketLeaseState {
  std::int64_t level;
  std::int64_t last_ms;
  std::int64_t next_id;
  std::vector<Lease> leases;  // sorted by expiry_ms, then id
};

// Whether any of `windows` leases as a bucket (token_bucket, leaky_bucket):
// such a lease holds refill back in the shared state until it returns, so
// a gateway gives it back even when spent (store/lease_hand.h).
bool HasBucketLease(std::span<const LimitParams> windows);

// lease_ttl's default, in ms.
inline constexpr std::int64_t kDefaultLeaseTtlMs = 1000;
// The smallest limit over `windows` (non-empty): lease_max's upper bound.
std::int64_t SmallestLimit(std::span<const LimitParams> windows);
// lease_max's default: a tenth of the smallest limit, at least 1.
inline std::int64_t DefaultLeaseMax(std::span<const LimitParams> windows) {
  return std::max<std::int64_t>(1, SmallestLimit(windows) / 10);
}

// The lease state of a sliding_log window: the log's runs of equal
// timestamps, oldest first, an outstanding lease's slots recorded at the
// latest moment they may be used (the take's time + hold), a returned
// one's used slots at their admission times.
using LogLeaseState = std::vector<SlidingLog::Run>;

// Whether any of `windows` is a sliding_log: its leases are returned with
// the times their used units were admitted, even when spent to the last
// unit, so that the log holds them at those times (docs/leases.md).
bool HasLogLease(std::span<const LimitParams> windows);

// How a take's units are used (docs/leases.md).
enum class TakeUse : std::uint8_t {
  // Held by the gateway as a lease and given back when it ends.
  kLease,
  // Admitted at once with the take, all or none: for a request that finds
  // nothing in hand for a key too quiet to want a lease of more than its
  // cost. The state changes as by a take at once returned fully used at
  // its time, and keeps no lease: what an exact decision costs.
  kSpent,
};

// What a take answers: `units` >= 1 valid for `valid_ms` (measured from the
// request's sending) with one stamp per window, or 0 units and
// `retry_after_ms` >= 1. A kSpent take's grant has neither validity nor
// stamps.
struct LeaseGrant {
  std::int64_t units = 0;
  std::int64_t valid_ms = 0;
  std::int64_t retry_after_ms = 0;
  std::vector<std::int64_t> stamps;
};

// The lease state of every window of one key. Not thread-safe.
class LeaseState {
 public:
  // Preconditions: ValidateWindows(windows) passed and LeaseRefusal() is
  // empty for each.
  LeaseState(std::span<const LimitParams> windows, std::int64_t now_ms);

  // Takes up to `want` (>= 1) units at `now_ms` (kSpent: exactly `want`,
  // or none); `use_ms` is lease_ttl, `hold_ms` (>= use_ms) how long an
  // unreturned bucket lease is kept.
  LeaseGrant Take(std::int64_t now_ms, std::int64_t want, std::int64_t use_ms,
                  std::int64_t hold_ms, TakeUse use = TakeUse::kLease);
  // Gives back `unused` units of a lease of `used + unused` with `stamps`
  // (one per window); returns the units given back (fewest over windows).
  // `used_at`: when the `used` units were admitted (runs of equal times on
  // this state's clock, at most `now_ms`, their counts summing to `used`),
  // or empty when not known; a sliding_log window moves the lease's used
  // slots from its stamp to those times (none later than the stamp).
  std::int64_t Return(std::int64_t now_ms, std::span<const std::int64_t> stamps, std::int64_t used,
                      std::int64_t unused, std::span<const SlidingLog::Run> used_at);

 private:
  std::vector<LimitParams> windows_;
  OwnedState decision_;                    // window algorithms' states
  std::vector<BucketLeaseState> buckets_;  // bucket windows', by window
  std::vector<LogLeaseState> logs_;        // sliding_log windows', by window
};

}  // namespace tollgate::algorithms
