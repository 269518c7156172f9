#include "store/leasing_store.h"

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstring>
#include <limits>

namespace tollgate::store {
namespace asio = boost::asio;
namespace {

// Units per lease_ttl from which a key is renewed in the background and its
// spent bucket leases go back at once.
constexpr std::int64_t kBusy = 2;

}  // namespace

// A limit as the leases of its keys saw it: copied, since a reload may
// free the rule's LimitSpec while its leases are still out.
struct LeasingStore::Spec {
  LimitSpec limit;
  LeaseStats::Rule* stats;
  // A bucket lease holds refill back in Redis until it returns: given back
  // even when spent (see docs/leases.md).
  bool bucket = false;
};

// A lease in hand.
struct LeasingStore::Held {
  std::int64_t left;
  std::int64_t used;
  std::int64_t end_ms;  // local: when its take was sent + valid_ms
  std::vector<std::int64_t> stamps;
};

struct LeasingStore::Waiter {
  DecisionSink* sink;
  std::int64_t cost;
  std::uint32_t partition;
};

struct LeasingStore::Entry final : ValuesSink {
  LeasingStore* store = nullptr;
  Spec* spec = nullptr;
  std::string_view key;  // the rule key: the tail of entries_'s key
  std::deque<Held> held;  // by end_ms
  std::int64_t in_hand = 0;
  std::deque<Waiter> waiters;
  bool taking = false;
  std::int64_t take_sent = 0;
  std::int64_t blocked_until = 0;  // the budget is spent until then
  // Units used in the period that began at period_start (lease_ttl long)
  // and in the one before it.
  std::int64_t period_start = 0;
  std::int64_t used_now = 0;
  std::int64_t used_before = 0;
  std::int64_t last_use = 0;

  void OnValues(const ValuesResult& result) override { store->OnTake(*this, result); }
};

class LeasingStore::Timer {
 public:
  explicit Timer(asio::io_context& io) : timer_(io) {}
  asio::steady_timer timer_;
  std::int64_t at = std::numeric_limits<std::int64_t>::max();
};

LeasingStore::LeasingStore(asio::io_context& io, std::unique_ptr<Store> exact, RedisStore& redis,
                           const Clock& clock, LeaseStats& stats, Options options)
    : clock_(clock),
      stats_(stats),
      options_(options),
      redis_(redis),
      timer_(std::make_unique<Timer>(io)),
      exact_(std::move(exact)) {}

LeasingStore::~LeasingStore() {
  // The Redis store completes its calls as it goes: waiting requests are
  // answered unavailable, nothing is sent.
  closing_ = true;
  timer_->timer_.cancel();
  exact_.reset();
  for (auto& [_, e] : entries_) {
    e.spec->stats->in_hand.fetch_sub(e.in_hand, std::memory_order_relaxed);
  }
}

LeasingStore::Entry* LeasingStore::Find(const DecideRequest& request) {
  const LimitSpec& limit = *request.limit;
  std::string id(sizeof(limit.fingerprint) + request.key.size(), '\0');
  std::memcpy(id.data(), &limit.fingerprint, sizeof(limit.fingerprint));
  std::memcpy(id.data() + sizeof(limit.fingerprint), request.key.data(), request.key.size());
  auto it = entries_.find(id);
  if (it != entries_.end()) return &it->second;
  if (entries_.size() >= options_.max_keys) return nullptr;
  std::unique_ptr<Spec>& spec = specs_[limit.fingerprint];
  if (!spec) {
    spec = std::make_unique<Spec>();
    spec->limit = limit;
    spec->stats = &stats_.For(limit.lease->rule);
    for (const algorithms::LimitParams& p : limit.windows) {
      if (p.algorithm == algorithms::Algorithm::kTokenBucket ||
          p.algorithm == algorithms::Algorithm::kLeakyBucket) {
        spec->bucket = true;
      }
    }
  }
  // Lease parameters may change without the fingerprint (a reload).
  spec->limit.lease = limit.lease;
  auto [at, _] = entries_.try_emplace(std::move(id));
  Entry& e = at->second;
  e.store = this;
  e.spec = spec.get();
  e.key = std::string_view(at->first).substr(sizeof(limit.fingerprint));
  e.period_start = request.now_ms;
  return &e;
}

void LeasingStore::Decide(const DecideRequest& request, DecisionSink& sink) {
  if (!request.limit->lease || closing_) {
    exact_->Decide(request, sink);
    return;
  }
  Entry* found = Find(request);
  if (found == nullptr) {
    exact_->Decide(request, sink);
    return;
  }
  Entry& e = *found;
  const std::int64_t now = request.now_ms;
  e.spec->stats->decisions.fetch_add(1, std::memory_order_relaxed);
  // Requests are answered in order: behind others waiting, wait too.
  if (e.waiters.empty()) {
    Expire(e, now);
    algorithms::Decision d;
    if (Spend(e, request.cost, now, d)) {
      e.spec->stats->from_lease.fetch_add(1, std::memory_order_relaxed);
      sink.OnDecision({StoreStatus::kOk, ResultSource::kPrimary, d});
      MaybeRenew(e, now);
      return;
    }
    if (e.blocked_until > now) {
      e.spec->stats->from_lease.fetch_add(1, std::memory_order_relaxed);
      d.allowed = false;
      d.remaining = 0;
      d.retry_after_ms = e.blocked_until - now;
      d.reset_ms = d.window_reset_ms = d.retry_after_ms;
      sink.OnDecision({StoreStatus::kOk, ResultSource::kPrimary, d});
      return;
    }
  }
  if (e.waiters.size() >= options_.max_waiting) {
    exact_->Decide(request, sink);
    return;
  }
  e.waiters.push_back({&sink, request.cost, request.partition});
  if (!e.taking) StartTake(e, now, request.cost - e.in_hand);
}

bool LeasingStore::Spend(Entry& e, std::int64_t cost, std::int64_t now, algorithms::Decision& d) {
  if (e.in_hand < cost) return false;
  std::int64_t need = cost;
  for (Held& h : e.held) {
    const std::int64_t take = std::min(need, h.left);
    h.left -= take;
    h.used += take;
    need -= take;
    if (need == 0) break;
  }
  e.in_hand -= cost;
  in_hand_ -= cost;
  e.spec->stats->in_hand.fetch_sub(cost, std::memory_order_relaxed);
  e.spec->stats->units[LeaseStats::kUnitsUsed].fetch_add(cost, std::memory_order_relaxed);
  NoteUse(e, now, cost);
  // A busy key's bucket lease spent to the last unit goes back now: Redis
  // refills the bucket only past the units it still counts as leased.
  if (e.spec->bucket && Rate(e, now) >= kBusy) {
    while (!e.held.empty() && e.held.front().left == 0) {
      GiveBack(e, e.held.front(), now);
      e.held.pop_front();
    }
  }
  d = {};
  d.allowed = true;
  d.remaining = e.in_hand;
  const std::int64_t lasts = e.held.empty() ? 0 : std::max<std::int64_t>(0, e.held.front().end_ms - now);
  d.reset_ms = d.window_reset_ms = lasts;
  return true;
}

void LeasingStore::Expire(Entry& e, std::int64_t now) {
  while (!e.held.empty() && e.held.front().end_ms <= now) {
    GiveBack(e, e.held.front(), now);
    e.held.pop_front();
  }
}

void LeasingStore::GiveBack(Entry& e, Held& held, std::int64_t now) {
  const std::int64_t unused = held.left;
  e.in_hand -= unused;
  in_hand_ -= unused;
  e.spec->stats->in_hand.fetch_sub(unused, std::memory_order_relaxed);
  // A window keeps what was used; a bucket lets the lease expire in Redis
  // (counted as spent) unless the key is busy enough for the refill to matter.
  if (unused == 0 && (!e.spec->bucket || Rate(e, now) < kBusy)) return;
  e.spec->stats->units[LeaseStats::kUnitsReturned].fetch_add(unused, std::memory_order_relaxed);
  redis_.ReturnLease(e.key, e.spec->limit, now, held.stamps, held.used, unused, nullptr);
}

std::int64_t LeasingStore::Rate(Entry& e, std::int64_t now) const {
  const std::int64_t ttl = e.spec->limit.lease->ttl_ms;
  const std::int64_t into = std::clamp<std::int64_t>(now - e.period_start, 0, ttl);
  // The previous period weighted by the part of it still within one
  // lease_ttl of now, as two_bucket estimates a sliding window.
  return e.used_now + e.used_before * (ttl - into) / ttl;
}

void LeasingStore::NoteUse(Entry& e, std::int64_t now, std::int64_t cost) {
  const std::int64_t ttl = e.spec->limit.lease->ttl_ms;
  if (now - e.period_start >= 2 * ttl) {
    e.used_before = 0;
    e.used_now = 0;
    e.period_start = now;
  } else if (now - e.period_start >= ttl) {
    e.used_before = e.used_now;
    e.used_now = 0;
    e.period_start += ttl;
  }
  e.used_now += cost;
  e.last_use = now;
}

void LeasingStore::MaybeRenew(Entry& e, std::int64_t now) {
  if (e.taking || e.blocked_until > now) return;
  const std::int64_t ttl = e.spec->limit.lease->ttl_ms;
  const std::int64_t rate = Rate(e, now);
  // A key used once per lease_ttl or less takes a lease when a request
  // needs one, as a decision would cost.
  if (rate < kBusy) return;
  const bool few = e.in_hand * 4 <= rate;
  const bool ending = e.held.empty() || e.held.back().end_ms - now <= ttl / 4;
  if (few || ending) StartTake(e, now, 1);
}

void LeasingStore::StartTake(Entry& e, std::int64_t now, std::int64_t need) {
  const LimitSpec::Lease& lease = *e.spec->limit.lease;
  std::int64_t want = std::min(std::max<std::int64_t>(Rate(e, now), 1), lease.max_units);
  for (const Waiter& w : e.waiters) need = std::max(need, w.cost);
  want = std::max(want, need);
  e.taking = true;
  e.take_sent = now;
  redis_.TakeLease(e.key, e.spec->limit, now, want, lease.ttl_ms, lease.ttl_ms + options_.grace_ms,
                   e);
}

void LeasingStore::OnTake(Entry& e, const ValuesResult& result) {
  e.taking = false;
  LeaseStats::Rule& stats = *e.spec->stats;
  if (closing_) {
    for (const Waiter& w : e.waiters) {
      w.sink->OnDecision({StoreStatus::kUnavailable, ResultSource::kPrimary, {}});
    }
    e.waiters.clear();
    return;
  }
  const std::int64_t now = clock_.NowMs();
  const std::size_t windows = e.spec->limit.windows.size();
  if (result.status != StoreStatus::kOk || result.values.size() < 3 ||
      (result.values[0] > 0 && result.values.size() != 3 + windows)) {
    stats.requests[LeaseStats::kFailed].fetch_add(1, std::memory_order_relaxed);
    // The exact path's on_error policy answers while Redis cannot.
    std::deque<Waiter> waiters;
    waiters.swap(e.waiters);
    for (const Waiter& w : waiters) {
      exact_->Decide({e.key, &e.spec->limit, w.cost, now, w.partition}, *w.sink);
    }
    Due(e, now + e.spec->limit.lease->ttl_ms);
    return;
  }
  const std::int64_t units = result.values[0];
  if (units <= 0) {
    stats.requests[LeaseStats::kRefused].fetch_add(1, std::memory_order_relaxed);
    // Not asked for again before Redis said it could have more, nor later
    // than lease_ttl: units other gateways hold come back within that.
    e.blocked_until =
        e.take_sent + std::clamp<std::int64_t>(result.values[2], 1, e.spec->limit.lease->ttl_ms);
    Due(e, e.blocked_until);
  } else {
    stats.requests[LeaseStats::kGranted].fetch_add(1, std::memory_order_relaxed);
    stats.units[LeaseStats::kUnitsGranted].fetch_add(units, std::memory_order_relaxed);
    stats.in_hand.fetch_add(units, std::memory_order_relaxed);
    Held h{units, 0, e.take_sent + result.values[1],
           std::vector<std::int64_t>(result.values.begin() + 3, result.values.end())};
    auto at = e.held.end();
    while (at != e.held.begin() && (at - 1)->end_ms > h.end_ms) --at;
    e.held.insert(at, std::move(h));
    e.in_hand += units;
    in_hand_ += units;
    Due(e, e.take_sent + result.values[1]);
  }
  Serve(e, now);
}

void LeasingStore::Serve(Entry& e, std::int64_t now) {
  Expire(e, now);
  while (!e.waiters.empty()) {
    const Waiter w = e.waiters.front();
    algorithms::Decision d;
    if (Spend(e, w.cost, now, d)) {
      e.waiters.pop_front();
      w.sink->OnDecision({StoreStatus::kOk, ResultSource::kPrimary, d});
      continue;
    }
    if (e.blocked_until > now) {
      e.waiters.pop_front();
      d = {};
      d.retry_after_ms = e.blocked_until - now;
      d.reset_ms = d.window_reset_ms = d.retry_after_ms;
      w.sink->OnDecision({StoreStatus::kOk, ResultSource::kPrimary, d});
      continue;
    }
    // Short of units: one more take, which the waiters wait for.
    StartTake(e, now, w.cost - e.in_hand);
    return;
  }
  MaybeRenew(e, now);
}

void LeasingStore::Due(const Entry& e, std::int64_t at) {
  const std::size_t bytes = sizeof(std::uint32_t);
  std::string id(bytes + e.key.size(), '\0');
  std::memcpy(id.data(), &e.spec->limit.fingerprint, bytes);
  std::memcpy(id.data() + bytes, e.key.data(), e.key.size());
  due_.emplace(at, std::move(id));
  if (at < timer_->at) Arm();
}

void LeasingStore::Arm() {
  if (due_.empty() || closing_) return;
  const std::int64_t at = due_.top().first;
  timer_->at = at;
  const std::int64_t wait = std::max<std::int64_t>(0, at - clock_.NowMs());
  timer_->timer_.expires_after(std::chrono::milliseconds(wait));
  timer_->timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    timer_->at = std::numeric_limits<std::int64_t>::max();
    Tick();
  });
}

void LeasingStore::Tick() {
  const std::int64_t now = clock_.NowMs();
  while (!due_.empty() && due_.top().first <= now) {
    const std::string id = due_.top().second;
    due_.pop();
    auto it = entries_.find(id);
    if (it == entries_.end()) continue;
    Entry& e = it->second;
    Expire(e, now);
    if (!e.held.empty() || !e.waiters.empty() || e.taking || e.blocked_until > now) continue;
    const std::int64_t quiet_at = e.last_use + e.spec->limit.lease->ttl_ms;
    if (quiet_at > now) {
      due_.emplace(quiet_at, id);
      continue;
    }
    entries_.erase(it);
  }
  timer_->timer_.cancel();
  timer_->at = std::numeric_limits<std::int64_t>::max();
  Arm();
}

}  // namespace tollgate::store
