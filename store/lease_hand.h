// One key's leases in one gateway's hand and the policy that spends,
// sizes, renews and gives them back (docs/leases.md): what LeasingStore
// does per key against Redis, and what `tollgate replay --sync lease`
// simulates per gateway against algorithms::LeaseState. Pure: no I/O,
// clock or locks; the caller passes the time. Not thread-safe.
#pragma once

#include <boost/container/small_vector.hpp>
#include <cstdint>
#include <span>
#include <vector>

#include "algorithms/limit.h"
#include "algorithms/state.h"

namespace tollgate::store {

// How much longer than lease_ttl the shared state keeps an unreturned
// bucket lease by default: the time a return sent when the lease ends may
// take (LeasingStore uses the Redis store's timeout).
inline constexpr std::int64_t kDefaultLeaseGraceMs = 20;

// Whether a limit's leases hold refill back in the shared state until they
// return: a token or leaky bucket's (algorithms::HasBucketLease).
enum class LeaseRefill { kFree, kHeldBack };
// Whether a lease keeps its admission times (Held::used_at): a
// sliding_log's (algorithms::HasLogLease).
enum class LeaseStamps { kNone, kKept };
// What becomes of a lease leaving the hand: sent back to Redis (units left,
// or a spent bucket lease whose hold on the refill must end), or forgotten.
enum class LeaseEnd { kReturn, kForget };

class LeaseHand {
 public:
  // Units per lease_ttl from which a key is renewed in the background and
  // its spent bucket leases go back at once.
  static constexpr std::int64_t kBusy = 2;

  // A lease in hand.
  struct Held {
    std::int64_t left = 0;
    std::int64_t used = 0;
    std::int64_t end_ms = 0;    // local: when its take was sent + valid_ms
    std::int64_t start_ms = 0;  // local: when its take was sent
    // Valid for less than lease_ttl: its window (fixed_window's, a
    // sub-window, two_bucket's bucket) ends first, and so would that of
    // any lease taken before end_ms.
    bool cut_short = false;
    // One per window (the take's answer), inline for up to two windows.
    boost::container::small_vector<std::int64_t, 2> stamps;
    // A sliding_log lease's: when its used units were admitted (the times
    // Spend was given), runs of equal times, oldest first; at most `used`
    // runs. Empty for the other algorithms.
    std::vector<algorithms::SlidingLog::Run> used_at;
  };
  // Told of a lease leaving the hand at `now` with its `left` units
  // unused; `send`: whether to give it back to the shared state: always
  // with unused units; a lease spent to the last unit only for a busy key's
  // bucket (the shared state refills past it only once it is back) or
  // sliding_log (the log moves its used slots from the stamp to their
  // admission times). A window keeps what was used; a quiet key's bucket
  // lease may expire, counted as spent, and its log lease keep its slots
  // at the stamp: a key seen now and then costs one call per lease.
  class Releases {
   public:
    virtual void OnRelease(const Held& held, LeaseEnd end, std::int64_t now) = 0;

   protected:
    ~Releases() = default;
  };

  // A key's recent use: what Rate, Want and Quiet read. Carried over when
  // LeasingStore forgets an idle hand and makes a new one for the key.
  struct Use {
    std::int64_t period_start = 0;
    std::int64_t used_now = 0;
    std::int64_t used_before = 0;
    std::int64_t last_use = 0;
  };

  // `ttl_ms`: lease_ttl; `refill` and `stamps`: what the limit's leases
  // keep besides units.
  LeaseHand(std::int64_t now_ms, std::int64_t ttl_ms, LeaseRefill refill, LeaseStamps stamps);

  Use use() const { return {period_start_, used_now_, used_before_, last_use_}; }
  // Takes over a forgotten hand's use (a new hand only).
  void Resume(const Use& use) {
    period_start_ = use.period_start;
    used_now_ = use.used_now;
    used_before_ = use.used_before;
    last_use_ = use.last_use;
  }
  // Nothing held, nothing blocked, no debt: only its use is worth keeping.
  bool Idle(std::int64_t now) const { return held_.empty() && !Blocked(now) && debt_ == 0; }

  // A new lease_ttl (a reload that kept the limit).
  void set_ttl(std::int64_t ttl_ms) { ttl_ms_ = ttl_ms; }

  // Gives back the leases that ended by `now`.
  void Expire(std::int64_t now, Releases& releases);
  // Gives back every lease (the gateway stops).
  void ReleaseAll(std::int64_t now, Releases& releases);
  // Spends `cost` units if the hand holds them: an allowing decision
  // (remaining: the units left in hand) in `d`.
  bool Spend(std::int64_t cost, std::int64_t now, algorithms::Decision& d, Releases& releases);
  // Settles a reservation of `reserved` units spent from this hand at
  // `reserved_at` to `actual` units at `now` (docs/leases.md, "Settling"):
  // a refund goes back into the leases in hand both then and now (so in
  // the window it was spent in: a lease never outlives its window), at
  // most the units each has used, and to the shared state with their
  // unused units when they end; a refund no such lease can take is left
  // to the caller. A charge is spent from the hand; what the hand lacks
  // becomes debt, at most `most_debt` in all (0: none, the caller settles
  // it elsewhere), which the next units the hand gets pay before any
  // request (PayDebt). Releases leases spent to the last unit as Spend
  // does.
  struct Settled {
    std::int64_t refunded = 0;  // units back in hand
    std::int64_t charged = 0;   // units spent from the hand
  };
  Settled Settle(std::int64_t reserved_at, std::int64_t now, std::int64_t reserved,
                 std::int64_t actual, std::int64_t most_debt, Releases& releases);
  // Spends units in hand on the debt (after Add): how many.
  std::int64_t PayDebt(std::int64_t now, Releases& releases);
  std::int64_t debt() const { return debt_; }
  // A state for a settle's answer: Limited() while blocked, else an
  // allowing decision with the units in hand (a key in debt has none).
  algorithms::Decision Shown(std::int64_t now) const;

  // Whether the shared budget is spent until later than `now`, and the
  // limiting decision that answers meanwhile.
  bool Blocked(std::int64_t now) const { return blocked_until_ > now; }
  algorithms::Decision Limited(std::int64_t now) const;

  // How many units to ask for: the use over the last lease_ttl, scaled to
  // Horizon (at least 1, at most `max_units`), and at least `need`.
  std::int64_t Want(std::int64_t now, std::int64_t need, std::int64_t max_units) const;
  // Whether a take for `need` units that one request waits for is spent at
  // once (algorithms::TakeUse::kSpent): nothing is in hand and the key
  // would not ask for more than the request needs (a cold key's take),
  // so a lease would be used up by that request anyway. It then costs the
  // shared state what an exact decision does: no lease to keep, expire or
  // give back.
  bool SpendsTake(std::int64_t now, std::int64_t need, std::int64_t max_units) const {
    return in_hand_ == 0 && Want(now, need, max_units) == need;
  }
  // A spent take's `cost` units were admitted at `now`.
  void NoteSpent(std::int64_t now, std::int64_t cost) { NoteUse(now, cost); }
  // Whether a busy key should ask for its next lease now, in the
  // background: few units left for its rate, or the newest lease ending
  // within a quarter of lease_ttl (unless its window cuts it short: a
  // lease taken now would end with it).
  bool WantsRenewal(std::int64_t now) const;

  // A take sent at `sent_ms` was answered with `units` >= 1 valid for
  // `valid_ms`; when it ends (local time).
  std::int64_t Add(std::int64_t sent_ms, std::int64_t units, std::int64_t valid_ms,
                   std::span<const std::int64_t> stamps);
  // A take sent at `sent_ms` found the budget spent: not asked for again
  // before `retry_after_ms` (clamped to 1..lease_ttl: units other gateways
  // hold come back within it); when that is.
  std::int64_t Block(std::int64_t sent_ms, std::int64_t retry_after_ms);

  // Nothing held, nothing blocked, no debt, and unused for a lease_ttl:
  // can be forgotten; else, when to look again (0: not before something
  // changes; a lease_ttl on with debt, for a take that pays it).
  bool Quiet(std::int64_t now, std::int64_t& look_again) const;

  std::int64_t in_hand() const { return in_hand_; }

 private:
  // Units used over about the last lease_ttl.
  std::int64_t Rate(std::int64_t now) const;
  // How long a lease taken now would last (ms): lease_ttl, or less when
  // the newest one in hand is cut short by its window's end.
  std::int64_t Horizon(std::int64_t now) const;
  // Whether a lease spent to the last unit goes back (see Releases).
  bool ReturnsSpent(std::int64_t now) const;
  void NoteUse(std::int64_t now, std::int64_t cost);
  void Release(Held& held, std::int64_t now, Releases& releases);
  // Spends `cost` <= in_hand_ units, oldest lease first.
  void SpendUnits(std::int64_t cost, std::int64_t now);
  // Releases the leases spent to the last unit that go back (ReturnsSpent).
  void ReleaseSpent(std::int64_t now, Releases& releases);

  std::int64_t ttl_ms_;
  bool bucket_;
  bool log_;
  // By end_ms; inline for one lease, a cold or steady key's usual hand (no
  // allocation for a new key), erased from the front (a few at most).
  boost::container::small_vector<Held, 1> held_;
  std::int64_t in_hand_ = 0;
  std::int64_t blocked_until_ = 0;
  std::int64_t debt_ = 0;  // units charged beyond the hand, not yet paid
  // Units used in the period that began at period_start_ (lease_ttl long)
  // and in the one before it.
  std::int64_t period_start_;
  std::int64_t used_now_ = 0;
  std::int64_t used_before_ = 0;
  std::int64_t last_use_ = 0;
};

}  // namespace tollgate::store
