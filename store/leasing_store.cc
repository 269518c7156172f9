#include "store/leasing_store.h"

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <limits>
#include <span>

#include "algorithms/lease.h"
#include "algorithms/validate.h"
#include "store/lease_entry.h"

namespace tollgate::store {
namespace asio = boost::asio;

class LeasingStore::Timer {
 public:
  explicit Timer(asio::io_context& io) : timer_(io) {}
  asio::steady_timer timer_;
  std::int64_t at = std::numeric_limits<std::int64_t>::max();
};

LeasingStore::LeasingStore(asio::io_context& io, std::unique_ptr<Store> exact,
                           FailoverStore* policy, RedisStore& redis, const Clock& clock,
                           LeaseStats& stats, Options options)
    : clock_(clock),
      stats_(stats),
      options_(options),
      policy_(policy),
      redis_(redis),
      recent_(options.recent_keys),
      timer_(std::make_unique<Timer>(io)),
      exact_(std::move(exact)) {}

LeasingStore::~LeasingStore() {
  // The Redis store completes its calls as it goes: waiting requests are
  // answered unavailable, nothing is sent.
  closing_ = true;
  timer_->timer_.cancel();
  exact_.reset();
  for (auto& [_, e] : entries_) {
    e->spec->stats->in_hand.fetch_sub(e->hand.in_hand(), std::memory_order_relaxed);
  }
}

LeasingStore::IdView LeasingStore::IdView::Of(std::uint32_t fingerprint, std::string_view key) {
  return {fingerprint, key,
          std::hash<std::string_view>()(key) ^ (std::size_t{fingerprint} * 0x9e3779b97f4a7c15u)};
}

LeasingStore::Entry* LeasingStore::Find(const DecideRequest& request) {
  const LimitSpec& limit = *request.limit;
  const IdView wanted = IdView::Of(limit.fingerprint, request.key);
  auto it = entries_.find(wanted);
  if (it != entries_.end()) return it->second.get();
  if (entries_.size() >= options_.max_keys) return nullptr;
  auto found = specs_.find(limit.fingerprint);
  if (found == specs_.end()) {
    // A limit not seen before (the first requests, or a reload): the specs
    // no key uses any more go now. Kept until then, so that a rule's cold
    // keys, each forgotten with its answer, do not copy its limit each.
    std::erase_if(specs_, [](const auto& kept) { return kept.second->entries == 0; });
    found = specs_.emplace(limit.fingerprint, nullptr).first;
  }
  std::unique_ptr<Spec>& spec = found->second;
  if (!spec) {
    spec = std::make_unique<Spec>();
    spec->limit = limit;
    spec->stats = &stats_.For(limit.lease->rule);
    spec->refill =
        algorithms::HasBucketLease(limit.windows) ? LeaseRefill::kHeldBack : LeaseRefill::kFree;
    spec->stamps = algorithms::HasLogLease(limit.windows) ? LeaseStamps::kKept : LeaseStamps::kNone;
  }
  // Lease parameters may change without the fingerprint (a reload).
  spec->limit.lease = limit.lease;
  auto owned = std::make_unique<Entry>(request.now_ms, *spec);
  Entry& e = *owned;
  e.store = this;
  e.spec = spec.get();
  e.key = request.key;
  ++spec->entries;
  e.hash = wanted.hash;
  const IdView id{limit.fingerprint, e.key, e.hash};
  if (const auto use = recent_.Find(e.hash, request.now_ms)) e.hand.Resume(*use);
  entries_.emplace(id, std::move(owned));
  return &e;
}

std::int64_t LeasingStore::Now() const {
  return options_.wall_clock ? clock_.UnixMs() : clock_.NowMs();
}

void LeasingStore::Fail(const DecideRequest& request, StoreStatus status, DecisionSink& sink) {
  if (policy_ != nullptr) {
    policy_->DecideFailed(request, status, sink);
  } else {
    sink.OnDecision({status, ResultSource::kPrimary, {}});
  }
}

void LeasingStore::Decide(const DecideRequest& request, DecisionSink& sink) {
  if (!request.limit->lease) {
    exact_->Decide(request, sink);
    return;
  }
  Entry* found = closing_ ? nullptr : Find(request);
  if (found == nullptr) {
    Fail(request, StoreStatus::kUnavailable, sink);
    return;
  }
  Entry& e = *found;
  const std::int64_t now = request.now_ms;
  // A reload may change lease_ttl and lease_max without the fingerprint.
  const LimitSpec::Lease& lease = *request.limit->lease;
  LimitSpec::Lease& kept = *e.spec->limit.lease;
  if (lease.ttl_ms != kept.ttl_ms || lease.max_units != kept.max_units) kept = lease;
  e.hand.set_ttl(kept.ttl_ms);
  e.spec->stats->decisions.fetch_add(1, std::memory_order_relaxed);
  // Requests are answered in order: behind others waiting, wait too.
  if (e.waiters.empty()) {
    e.hand.Expire(now, e);
    algorithms::Decision d;
    if (Spend(e, request.cost, now, d)) {
      e.spec->stats->from_lease.fetch_add(1, std::memory_order_relaxed);
      sink.OnDecision({StoreStatus::kOk, ResultSource::kPrimary, d});
      MaybeRenew(e, now);
      return;
    }
    if (e.hand.Blocked(now)) {
      e.spec->stats->from_lease.fetch_add(1, std::memory_order_relaxed);
      sink.OnDecision({StoreStatus::kOk, ResultSource::kPrimary, e.hand.Limited(now)});
      return;
    }
  }
  if (e.waiters.size() >= options_.max_waiting || e.takes_fail_until > now) {
    Fail(request, StoreStatus::kUnavailable, sink);
    return;
  }
  e.waiters.push_back({&sink, request.cost, request.partition});
  if (!e.taking) StartTake(e, now, request.cost - e.hand.in_hand());
}

void LeasingStore::Settle(const SettleRequest& request, DecisionSink& sink) {
  const DecideRequest& r = request.reservation;
  if (!r.limit->lease) {
    exact_->Settle(request, sink);
    return;
  }
  if (request.reserved_by != ResultSource::kPrimary) {
    // The on_error policy answered the reservation: it settles it.
    if (policy_ != nullptr) {
      policy_->Settle(request, sink);
    } else {
      sink.OnDecision({StoreStatus::kUnavailable, ResultSource::kPrimary, {}});
    }
    return;
  }
  Entry* found = closing_ ? nullptr : Find(r);
  if (found == nullptr) {
    sink.OnDecision({StoreStatus::kUnavailable, ResultSource::kPrimary, {}});
    return;
  }
  Entry& e = *found;
  const std::int64_t now = request.now_ms;
  e.hand.Expire(now, e);
  // What the hand cannot settle (a refund its leases cannot take back, a
  // charge beyond its units) goes to a window's shared state, whose lease
  // keys hold the decision state: settled there as algorithms::Settle
  // settles a window. A bucket lease's state is not a decision's: its
  // charge is debt in the hand (bounded as algorithms::Settle bounds a
  // bucket's, by twice the smallest capacity), its refund dropped.
  const bool windows = !algorithms::HasBucketLease(r.limit->windows);
  std::int64_t most_debt = 0;
  if (!windows) {
    most_debt = std::numeric_limits<std::int64_t>::max();
    for (const algorithms::LimitParams& w : r.limit->windows) {
      most_debt = std::min(most_debt, 2 * algorithms::Capacity(w));
    }
  }
  const LeaseHand::Settled settled =
      e.hand.Settle(r.now_ms, now, r.cost, request.actual, most_debt, e);
  const std::int64_t refund = std::max<std::int64_t>(0, r.cost - request.actual) - settled.refunded;
  const std::int64_t charge = std::max<std::int64_t>(0, request.actual - r.cost) - settled.charged;
  if (windows && (refund > 0 || charge > 0)) {
    redis_.SettleLeased(e.key, *r.limit, r.now_ms, now, refund, charge);
  }
  const std::int64_t back = settled.refunded - settled.charged;
  in_hand_ += back;
  e.spec->stats->in_hand.fetch_add(back, std::memory_order_relaxed);
  e.spec->stats->units[LeaseStats::kUnitsUsed].fetch_add(settled.charged,
                                                         std::memory_order_relaxed);
  PayDebt(e, now);  // a refund into a hand still in debt pays it first
  sink.OnDecision({StoreStatus::kOk, ResultSource::kPrimary, e.hand.Shown(now)});
  // Debt is paid by the next take (now, unless one is on its way or the
  // budget is spent).
  if (e.hand.debt() > 0 && !e.taking && !e.hand.Blocked(now)) {
    StartTake(e, now, std::min(e.hand.debt(), e.spec->limit.lease->max_units));
  } else if (!e.taking && e.dues == 0 && e.waiters.empty()) {
    ForgetIfIdle(e, now);
  }
}

void LeasingStore::PayDebt(Entry& e, std::int64_t now) {
  const std::int64_t paid = e.hand.PayDebt(now, e);
  in_hand_ -= paid;
  e.spec->stats->in_hand.fetch_sub(paid, std::memory_order_relaxed);
  e.spec->stats->units[LeaseStats::kUnitsUsed].fetch_add(paid, std::memory_order_relaxed);
}

bool LeasingStore::Spend(Entry& e, std::int64_t cost, std::int64_t now, algorithms::Decision& d) {
  if (!e.hand.Spend(cost, now, d, e)) return false;
  in_hand_ -= cost;
  e.spec->stats->in_hand.fetch_sub(cost, std::memory_order_relaxed);
  e.spec->stats->units[LeaseStats::kUnitsUsed].fetch_add(cost, std::memory_order_relaxed);
  return true;
}

void LeasingStore::GiveBack(Entry& e, const LeaseHand::Held& held, LeaseEnd end, std::int64_t now) {
  in_hand_ -= held.left;
  e.spec->stats->in_hand.fetch_sub(held.left, std::memory_order_relaxed);
  if (end == LeaseEnd::kForget) return;
  e.spec->stats->units[LeaseStats::kUnitsReturned].fetch_add(held.left, std::memory_order_relaxed);
  redis_.ReturnLease(e.key, e.spec->limit, now, held.stamps, held.used, held.left, held.used_at,
                     nullptr);
}

void LeasingStore::MaybeRenew(Entry& e, std::int64_t now) {
  if (!e.taking && e.hand.WantsRenewal(now)) StartTake(e, now, 1);
}

void LeasingStore::StartTake(Entry& e, std::int64_t now, std::int64_t need) {
  const LimitSpec::Lease& lease = *e.spec->limit.lease;
  for (const Waiter& w : e.waiters) need = std::max(need, w.cost);
  e.take_spent = e.waiters.size() == 1 && e.hand.SpendsTake(now, need, lease.max_units);
  const std::int64_t want = e.take_spent ? need : e.hand.Want(now, need, lease.max_units);
  e.taking = true;
  e.take_sent = now;
  redis_.TakeLease(e.key, e.spec->limit, now, want, lease.ttl_ms, lease.ttl_ms + options_.grace_ms,
                   e, e.take_spent ? algorithms::TakeUse::kSpent : algorithms::TakeUse::kLease);
}

void LeasingStore::OnTake(Entry& e, const ValuesResult& result) {
  e.taking = false;
  const bool spent = e.take_spent;
  e.take_spent = false;
  LeaseStats::Rule& stats = *e.spec->stats;
  if (closing_) {
    for (const Waiter& w : e.waiters) {
      w.sink->OnDecision({StoreStatus::kUnavailable, ResultSource::kPrimary, {}});
    }
    e.waiters.clear();
    return;
  }
  const std::int64_t now = Now();
  // A refusal is {0, 0, retry}; a grant {g, valid, 0, a stamp per window},
  // a spent take's exactly {its waiter's cost, 0, 0}.
  const std::vector<std::int64_t>& v = result.values;
  bool valid = result.status == StoreStatus::kOk && v.size() >= 3 && !(spent && e.waiters.empty());
  if (valid && v[0] <= 0) {
    valid = v.size() == 3;
  } else if (valid && spent) {
    valid = v.size() == 3 && v[0] == e.waiters.front().cost && v[1] == 0 && v[2] == 0;
  } else if (valid) {
    valid = v.size() == 3 + e.spec->limit.windows.size();
  }
  if (!valid) {
    stats.requests[LeaseStats::kFailed].fetch_add(1, std::memory_order_relaxed);
    // The on_error policy answers while Redis cannot.
    const StoreStatus status =
        result.status != StoreStatus::kOk ? result.status : StoreStatus::kError;
    e.takes_fail_until = now + kFailedTakeBackoffMs;
    Entry::Waiters waiters;
    waiters.swap(e.waiters);
    for (const Waiter& w : waiters) {
      Fail({e.key, &e.spec->limit, w.cost, now, w.partition}, status, *w.sink);
    }
    Due(e, e.takes_fail_until);
    return;
  }
  const std::int64_t units = result.values[0];
  if (units <= 0) {
    stats.requests[LeaseStats::kRefused].fetch_add(1, std::memory_order_relaxed);
    const std::int64_t until = e.hand.Block(e.take_sent, result.values[2]);
    Due(e, until);
    if (spent) {
      // Answered now, even if the reply came after `until`: a take for it
      // sent again at once would find the budget as short.
      const Waiter w = e.waiters.front();
      e.waiters.erase(e.waiters.begin());
      w.sink->OnDecision(
          {StoreStatus::kOk, ResultSource::kPrimary, e.hand.Limited(std::min(now, until - 1))});
    }
  } else {
    if (policy_ != nullptr) policy_->PrimaryAnswered();
    stats.requests[LeaseStats::kGranted].fetch_add(1, std::memory_order_relaxed);
    stats.units[LeaseStats::kUnitsGranted].fetch_add(units, std::memory_order_relaxed);
    if (spent) {
      // The front waiter's units, admitted now; the entry is then
      // forgotten unless more is going on (ForgetIfIdle).
      stats.units[LeaseStats::kUnitsUsed].fetch_add(units, std::memory_order_relaxed);
      const Waiter w = e.waiters.front();
      e.waiters.erase(e.waiters.begin());
      e.hand.NoteSpent(now, w.cost);
      algorithms::Decision d;
      d.allowed = true;
      w.sink->OnDecision({StoreStatus::kOk, ResultSource::kPrimary, d});
      Serve(e, now);
      ForgetIfIdle(e, now);
      return;
    } else {
      stats.in_hand.fetch_add(units, std::memory_order_relaxed);
      in_hand_ += units;
      Due(e, e.hand.Add(e.take_sent, units, result.values[1],
                        std::span<const std::int64_t>(result.values).subspan(3)));
      PayDebt(e, now);
    }
  }
  Serve(e, now);
}

void LeasingStore::Serve(Entry& e, std::int64_t now) {
  e.hand.Expire(now, e);
  // Answered from the front; erased at once when done (not one by one: a
  // vector).
  std::size_t served = 0;
  for (; served < e.waiters.size(); ++served) {
    const Waiter w = e.waiters[served];
    algorithms::Decision d;
    if (Spend(e, w.cost, now, d)) {
      w.sink->OnDecision({StoreStatus::kOk, ResultSource::kPrimary, d});
    } else if (e.hand.Blocked(now)) {
      w.sink->OnDecision({StoreStatus::kOk, ResultSource::kPrimary, e.hand.Limited(now)});
    } else {
      break;
    }
  }
  e.waiters.erase(e.waiters.begin(), e.waiters.begin() + served);
  if (!e.waiters.empty()) {
    // Short of units: one more take, which the waiters wait for (unless a
    // sink's callback started one already).
    if (!e.taking) StartTake(e, now, e.waiters.front().cost - e.hand.in_hand());
    return;
  }
  MaybeRenew(e, now);
}

void LeasingStore::Due(Entry& e, std::int64_t at) {
  ++e.dues;
  dues_.Push(at, &e);
  if (at < timer_->at) Arm();
}

void LeasingStore::Arm() {
  const auto* next = dues_.Top();
  if (next == nullptr || closing_) return;
  const std::int64_t at = next->at;
  timer_->at = at;
  const std::int64_t wait = std::max<std::int64_t>(0, at - Now());
  timer_->timer_.expires_after(std::chrono::milliseconds(wait));
  timer_->timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    timer_->at = std::numeric_limits<std::int64_t>::max();
    Tick();
  });
}

void LeasingStore::Forget(Entry& e) {
  Spec* spec = e.spec;
  // By position: the key views the entry the erase destroys.
  entries_.erase(entries_.find(IdView{spec->limit.fingerprint, e.key, e.hash}));
  --spec->entries;
}

void LeasingStore::ForgetIfIdle(Entry& e, std::int64_t now) {
  // A sink's callback may have started another take, or a failed one
  // queued a look; those look at the entry again when they end.
  if (e.taking || e.dues > 0) return;
  if (e.waiters.empty() && e.hand.Idle(now)) {
    recent_.Put(e.hash, e.hand.use());
    Forget(e);
    return;
  }
  Due(e, now + e.spec->limit.lease->ttl_ms);
}

void LeasingStore::Drain() {
  const std::int64_t now = Now();
  for (auto& [_, e] : entries_) e->hand.ReleaseAll(now, *e);
}

void LeasingStore::Tick() {
  const std::int64_t now = Now();
  for (const auto* next = dues_.Top(); next != nullptr && next->at <= now; next = dues_.Top()) {
    Entry& e = *next->value;
    dues_.Pop();
    --e.dues;
    e.hand.Expire(now, e);
    // Looked at again for its own items still queued.
    if (!e.waiters.empty() || e.taking || e.dues > 0) continue;
    if (e.hand.debt() > 0 && e.hand.in_hand() == 0 && !e.hand.Blocked(now)) {
      // A settle's debt that no take has paid yet: one now.
      StartTake(e, now, std::min(e.hand.debt(), e.spec->limit.lease->max_units));
      continue;
    }
    std::int64_t look_again = 0;
    if (e.hand.Quiet(now, look_again)) {
      Forget(e);
    } else if (look_again > 0) {
      Due(e, look_again);
    }
  }
  timer_->timer_.cancel();
  timer_->at = std::numeric_limits<std::int64_t>::max();
  Arm();
}

}  // namespace tollgate::store
