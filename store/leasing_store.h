// LeasingStore: decides the rules with sync = "lease" (LimitSpec::lease)
// from leases of their keys' budgets in Redis (docs/leases.md), and hands
// every other decision to the store behind it (the exact path: Redis
// behind its on_error decorator).
//
// Per key it keeps the leases in hand (store/lease_hand.h, the policy
// below) and spends them oldest first: a
// request whose cost is in hand is answered at once, inline, without Redis.
// The next lease is asked for in the background before the hand runs out
// (a quarter of the expected use left, or a quarter of lease_ttl), sized to
// the key's use over the last lease_ttl (at least 1 unit, at most
// lease_max, at least what waiting requests need). Only a request that
// finds the hand short waits, for that one call (a cold key's first
// request costs what a decision costs). A key whose budget is spent is not
// asked for again before the time Redis named (at most lease_ttl, within
// which units other gateways hold come back): its requests are limited
// locally meanwhile. Unused units go back to Redis when their lease ends (lease_ttl,
// on this gateway's clock, from when the take was sent); a bucket lease
// spent to the last unit goes back at once (it frees the bucket's refill).
// When Redis cannot answer a take, the requests waiting for it are answered
// by the on_error policy (FailoverStore::DecideFailed), never by the exact
// path, whose keys are another budget; so are, for kFailedTakeBackoffMs,
// the key's requests that the hand cannot serve, and the requests past
// max_keys or max_waiting.
//
// A reload that changes a limit changes its fingerprint: the old limit's
// leases are never spent again and go back when they end.
//
// One per I/O thread, on that thread's io_context, like the RedisStore it
// uses. Not thread-safe. LeaseStats is shared and thread-safe.
#pragma once

#include <boost/unordered/unordered_flat_map.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "store/due_queue.h"
#include "store/failover_store.h"
#include "store/lease_hand.h"
#include "store/lease_stats.h"
#include "store/recent_use.h"
#include "store/redis_store.h"
#include "store/store.h"

namespace boost::asio {
class io_context;
}

namespace tollgate::store {

class LeasingStore final : public Store {
 public:
  struct Options {
    // Added to lease_ttl for how long Redis keeps an unreturned bucket
    // lease: the time a return sent when the lease ends may take (the Redis
    // store's timeout).
    std::int64_t grace_ms = kDefaultLeaseGraceMs;
    // Keys tracked at once; past it, lease rules' new keys are answered by
    // the on_error policy until some go quiet.
    std::size_t max_keys = 1 << 20;
    // Requests of one key waiting for a lease; past it, by the policy.
    std::size_t max_waiting = 4096;
    // Forgotten keys whose recent use is remembered (RecentUse's slots).
    std::size_t recent_keys = 1 << 14;
    // The requests' now_ms are the clock's UnixMs() (Redis with time =
    // "client"), not its NowMs(): the store's timers and answers use the
    // same scale.
    bool wall_clock = false;
  };
  // After a take Redis could not answer, the key's requests that the hand
  // cannot serve are answered by the policy this long without a take.
  static constexpr std::int64_t kFailedTakeBackoffMs = 100;

  // `redis` is the store `exact` decides with (owned by it); `policy`, if
  // not null, answers for Redis when it cannot (usually `exact` itself);
  // null: such requests fail (kUnavailable). `clock`, `stats` must outlive
  // this.
  LeasingStore(boost::asio::io_context& io, std::unique_ptr<Store> exact, FailoverStore* policy,
               RedisStore& redis, const Clock& clock, LeaseStats& stats, Options options);
  ~LeasingStore() override;
  LeasingStore(const LeasingStore&) = delete;
  LeasingStore& operator=(const LeasingStore&) = delete;

  void Decide(const DecideRequest& request, DecisionSink& sink) override;
  // A lease rule's reservation answered from a lease settles against the
  // key's hand, inline, without Redis (LeaseHand::Settle, docs/leases.md
  // "Settling"): a refund goes back into the leases still in hand, a
  // charge is spent from the hand; what the hand cannot settle goes to the
  // window's state in Redis, or for a bucket is debt that the next take
  // (started at once) pays, or a dropped refund. One the on_error policy answered
  // is settled by the policy's store; other rules' by the exact path.
  void Settle(const SettleRequest& request, DecisionSink& sink) override;
  std::string_view Kind() const override { return exact_->Kind(); }
  // Gives back every lease in hand: a draining gateway's units are other
  // gateways' again at once (a window's would stay counted to its end).
  void Drain() override;

  // Gives back the leases that ended by the clock's now and forgets quiet
  // keys. Runs on a timer; tests driving a ManualClock call it.
  void Tick();

  // Units in hand over every key (tests).
  std::int64_t UnitsInHand() const { return in_hand_; }
  std::size_t KeyCount() const { return entries_.size(); }

 private:
  struct Spec;
  struct Waiter;
  struct Entry;
  // entries_'s key: a limit's fingerprint and a rule key (the entry's own
  // copy, which does not move), with their hash, computed once per request
  // (Of) for the lookup, the insert, RecentUse and the erase.
  struct IdView {
    std::uint32_t fingerprint;
    std::string_view key;
    std::size_t hash;
    static IdView Of(std::uint32_t fingerprint, std::string_view key);
    bool operator==(const IdView&) const = default;
  };
  struct IdHash {
    std::size_t operator()(const IdView& id) const { return id.hash; }
  };
  Entry* Find(const DecideRequest& request);
  // The time on the requests' scale (Options::wall_clock).
  std::int64_t Now() const;
  // Answers `request` as on_error does for a failure `status`.
  void Fail(const DecideRequest& request, StoreStatus status, DecisionSink& sink);
  // Spends units in hand on the key's debt (after a take's units came).
  void PayDebt(Entry& e, std::int64_t now);
  // Spends `cost` units from the hand if it holds them.
  bool Spend(Entry& e, std::int64_t cost, std::int64_t now, algorithms::Decision& d);
  // A lease leaving `e`'s hand (LeaseHand::Releases): counted, and sent
  // back to Redis for kReturn.
  void GiveBack(Entry& e, const LeaseHand::Held& held, LeaseEnd end, std::int64_t now);
  // Asks for a lease in the background when the hand runs low.
  void MaybeRenew(Entry& e, std::int64_t now);
  void StartTake(Entry& e, std::int64_t now, std::int64_t need);
  void OnTake(Entry& e, const ValuesResult& result);
  // Answers waiting requests from the hand, limits them while the budget is
  // spent, or asks for more.
  void Serve(Entry& e, std::int64_t now);
  void Due(Entry& e, std::int64_t at);
  void Arm();
  // Erases `e` (nothing of its may be queued or pending).
  void Forget(Entry& e);
  // A key whose spent take was answered: forgotten at once when nothing
  // else is going on, its use kept in recent_; else looked at later.
  void ForgetIfIdle(Entry& e, std::int64_t now);

  class Timer;
  const Clock& clock_;
  LeaseStats& stats_;
  Options options_;
  FailoverStore* policy_;
  RedisStore& redis_;
  // By fingerprint; one a reload replaced goes when its last key has gone
  // and another limit is first seen.
  std::unordered_map<std::uint32_t, std::unique_ptr<Spec>> specs_;
  // Open addressing: a new key's lookup, which misses, reads one group of
  // the table's metadata, not a chain of nodes (tens of thousands of cold
  // keys, out of cache). The entries are allocated apart: Entry* stay valid.
  boost::unordered_flat_map<IdView, std::unique_ptr<Entry>, IdHash> entries_;
  // Cold keys, whose entries go as soon as their spent take is answered:
  // entries_ then holds only the keys in use, and stays in cache.
  RecentUse recent_;
  // When an entry needs looking at (a lease's end, a spent budget's):
  // mostly now + lease_ttl, in time order. Entries are not erased while any
  // of their items is queued (Entry::dues), so the pointers stay valid.
  DueQueue<Entry*> dues_;
  std::int64_t in_hand_ = 0;
  bool closing_ = false;
  std::unique_ptr<Timer> timer_;
  std::unique_ptr<Store> exact_;  // declared last: destroyed first (see the destructor)
};

}  // namespace tollgate::store
