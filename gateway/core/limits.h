// Phase admit, its pure part: which rate rules apply to a request, what
// their decisions mean for it (forward, delay, reject, 401, 503), and how
// long a delayed request waits. No I/O, clock, Asio or Beast: the awaiting
// and the waits are gateway/core/admission.h's. Runs on the request's
// worker thread; the rule set and store are shared and thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gateway/core/overrides.h"
#include "gateway/core/waiting_room.h"
#include "gateway/telemetry/metrics.h"
#include "rules/identity.h"
#include "rules/rule_set.h"
#include "store/inflight.h"
#include "store/store.h"

namespace tollgate::gateway {

enum class Verdict { kForward, kDelay, kReject, kUnauthorized, kStoreUnavailable };

// A delay rule that limited the request: it waits and is decided again.
struct DelayedHit {
  const rules::RuleHit* hit;  // into the Evaluation passed to DecideLimits
  algorithms::Decision decision;
  // The rule as decided: hit->rule, or an override's form of it (kept
  // alive by LimitOutcome::overridden).
  const rules::RuleConfig* rule = nullptr;
};

// Units a settling rule (budget.settle, or an LLM preset) reserved for the
// request: the decision as the store was asked it, to be settled to the
// response's cost when the response ends (store::SettleRequest). `rule`
// and `limit` live as long as the exchange's configuration (an override's
// form of the rule is held by LimitOutcome::overridden).
struct Reservation {
  const rules::RuleConfig* rule = nullptr;  // as configured (metrics, log)
  const rules::RuleConfig* decided_by = nullptr;  // the rule, or its override's form
  std::string key;  // the store key decided
  std::int64_t cost = 0;
  std::int64_t now_ms = 0;  // the decision's time, on the store's (or calendar's) clock
  std::uint32_t partition = 0;
  std::uint64_t key_hash = 0;
  store::ResultSource source = store::ResultSource::kPrimary;
};

// A concurrency rule's place, held until the exchange ends. When it goes
// back, the request whose turn it is in the key's waiting line (if the
// rule lets requests wait) is told to try again: nobody polls for it.
class HeldPlace {
 public:
  // `room`: null when the rule has no wait (nobody to tell).
  HeldPlace(store::InflightGuard place, WaitingRoom* room, std::string_view key)
      : place_(std::move(place)), room_(room) {
    if (room_ != nullptr) key_ = key;
  }
  HeldPlace(HeldPlace&& other) noexcept
      : place_(std::move(other.place_)),
        room_(std::exchange(other.room_, nullptr)),
        key_(std::move(other.key_)) {}
  HeldPlace& operator=(HeldPlace&&) = delete;
  HeldPlace(const HeldPlace&) = delete;
  ~HeldPlace() {
    place_.Release();
    if (room_ != nullptr) room_->Wake(key_);
  }

 private:
  store::InflightGuard place_;
  WaitingRoom* room_;
  std::string key_;
};

struct LimitOutcome {
  Verdict verdict = Verdict::kForward;
  // The rule whose numbers go into the response headers (the one closest to
  // its limit, or the one that limited), and its decision.
  const rules::RuleConfig* shown = nullptr;
  algorithms::Decision shown_decision;
  std::int64_t delay_ms = 0;        // leaky_bucket shaping: hold the request this long
  std::vector<DelayedHit> delayed;  // kDelay: the delay rules that limited
  std::string log;                  // "rule:decision,..." for the access log (if describe)
  // Places held for the concurrency rules until the exchange ends.
  std::vector<HeldPlace> inflight;
  // The overrides' forms of the rules that `shown` and `delayed` may point
  // to (gateway/core/overrides.h), held while the exchange lasts; empty
  // when no override applied.
  std::vector<std::shared_ptr<const rules::RuleConfig>> overridden;
  // What the settling rules reserved, once each allowed the request.
  std::vector<Reservation> reserved;
  // kReject: a rule refused the request because its cost is more than the
  // rule's limit can ever allow (a cost from the request).
  bool beyond_capacity = false;

  // As a fresh LimitOutcome, keeping the vectors' and string's room (no
  // object built and move-assigned per request). Beside the fields: one
  // added must be reset here too.
  void Reset() {
    verdict = Verdict::kForward;
    shown = nullptr;
    shown_decision = algorithms::Decision{};
    delay_ms = 0;
    delayed.clear();
    log.clear();
    inflight.clear();
    overridden.clear();
    reserved.clear();
    beyond_capacity = false;
  }
};

struct LimitContext {
  const rules::IdentityResolver& identity;
  const rules::RuleSet& rules;
  // The configured store (this worker's): with Redis, the decorator that
  // answers by on_error when Redis cannot (store/failover_store.h).
  store::Store& store;
  std::int64_t now_ms;                         // the gateway's clock
  std::int64_t store_now_ms;                   // the configured store's clock
  ThreadMetrics* metrics = nullptr;            // null: not recorded
  const std::vector<int>* rule_ids = nullptr;  // metric ids by index in `rules_base`
  const rules::RuleConfig* rules_base = nullptr;
  StoreKindLabel store_kind = StoreKindLabel::kLocal;
  bool describe = true;  // fill LimitOutcome::log (only the access log reads it)
  // The overrides in force (null: none), and the wall clock they end by
  // and calendar windows count on.
  const OverrideTable* overrides = nullptr;
  std::int64_t unix_ms = 0;
};

// Told when the last decision of a DecisionBatch has arrived.
class BatchWaker {
 public:
  virtual void Wake() = 0;

 protected:
  ~BatchWaker() = default;
};

// The decisions of several rules, asked of the store at once (a Redis store
// pipelines them) and collected as they complete, inline or later on this
// thread. Not movable: the store holds pointers to its slots until they
// complete, which every store guarantees within its own deadline.
class DecisionBatch {
 public:
  DecisionBatch() = default;
  DecisionBatch(const DecisionBatch&) = delete;
  DecisionBatch& operator=(const DecisionBatch&) = delete;

  // Asks context.store for one decision per hit, at context.store_now_ms,
  // each costing `cost` when > 0 (an RLS call's hits_addend), else the
  // hit's own cost when it has one (RuleHit::cost), else its rule's. A key with an override (context.overrides) is decided by
  // the override's form of its rule, under the override's store key.
  // `key_hashes`: store::KeyHash of each hit's key, from a caller that
  // decides the same hits many times; empty: the store hashes them.
  // `descriptor_limit`: an RLS descriptor's own limit, which decides in
  // place of each rule's and of any override (descriptor_limit.h).
  void Start(const LimitContext& context, std::span<const rules::RuleHit* const> hits,
             std::int64_t cost = 0, std::span<const std::uint64_t> key_hashes = {},
             const rules::DescriptorLimit* descriptor_limit = nullptr);
  bool done() const { return pending_ == 0; }
  // The rule hit `i` was decided by: its own, or an override's form of it.
  const rules::RuleConfig& rule(std::size_t i) const { return *slots_[i].rule; }
  // Hit `i`'s override's form of its rule, or null.
  const std::shared_ptr<const rules::RuleConfig>& overridden(std::size_t i) const {
    return slots_[i].overridden;
  }
  // Wake() is called when the last pending decision arrives (also when it
  // arrives inline, within Start). Null: nobody is told.
  void set_waker(BatchWaker* waker) { waker_ = waker; }
  const store::StoreResult& result(std::size_t i) const { return slots_[i].result; }
  // Hit `i`'s decision as the store was asked it (its key, cost, time,
  // partition and hash); valid while the batch's hits are.
  const store::DecideRequest& asked(std::size_t i) const { return slots_[i].asked; }
  // Hit `i` was refused without asking the store: its cost is more than
  // its rule's limit can ever allow.
  bool beyond_capacity(std::size_t i) const { return slots_[i].beyond_capacity; }

 private:
  struct Slot final : store::DecisionSink {
    DecisionBatch* batch = nullptr;
    store::StoreResult result;
    const rules::RuleConfig* rule = nullptr;
    std::shared_ptr<const rules::RuleConfig> overridden;
    std::string store_key;  // under a descriptor's limit
    store::DecideRequest asked;
    bool beyond_capacity = false;
    void OnDecision(const store::StoreResult& r) override;
  };
  std::vector<Slot> slots_;
  std::size_t pending_ = 0;
  BatchWaker* waker_ = nullptr;
};

// How step 1 went.
enum class LimitStart {
  kDecided,    // no store is needed (unauthorized token, exempt rule, no
               // rule applies): `outcome` is the answer
  kStarted,    // the applying rules are in `scratch.hits`, their decisions
               // started in `batch`
  kNeedsBody,  // likewise, but the cost or the key (json:PATH) of a rule
               // comes from the request body: complete the hits
               // (gateway/core/request_cost.h), then batch.Start
};

// Step 1 of deciding a request. The hits whose cost a request header gives
// (cost = { header = ... }) get it here.
LimitStart StartLimits(const LimitContext& context, const rules::RequestFacts& request,
                 const rules::Identity& identity, rules::Evaluation& scratch,
                 std::vector<const rules::RuleHit*>& hits, DecisionBatch& batch,
                 LimitOutcome& outcome);

// Step 2, once `batch` is done: what the decisions mean for the request.
// A settling rule that allowed it (status kOk, decided by a store) adds
// its Reservation to outcome.reserved.
// A decision no store could make (status not kOk: the on_error policy's
// answer, already counted by the store decorator) is logged "error"; one
// the policy denied (store::ResultSource::kPolicyDenied) makes the verdict
// kStoreUnavailable; one the fallback store made is logged "(local)".
// Written into `outcome`, which is Reset() first.
void FinishLimits(const LimitContext& context, std::span<const rules::RuleHit* const> hits,
                  const DecisionBatch& batch, LimitOutcome& outcome);

// Step 3, for a request the rate rules let through: whether concurrency rule
// `hit` (max_inflight) gave it a place; for the log and metrics.
void NoteInflight(const LimitContext& context, const rules::RuleHit& hit, bool admitted,
                  LimitOutcome& outcome);

// Adds batch decision `i` (of `hit`, allowed) to outcome.reserved when its
// rule settles and a store decided it (what on_error = "allow" let through
// holds nothing to settle).
void NoteReservation(const rules::RuleHit& hit, const DecisionBatch& batch, std::size_t i,
                     LimitOutcome& outcome);

// A request's cost from a header's value (cost = { header = ... }): a
// non-negative decimal integer, else `otherwise` (the rule's cost_default).
std::int64_t CostFromHeader(std::string_view value, std::int64_t otherwise);

// How long a delayed request waits before it is decided again. For
// fixed_window (one window), the delayed-queue estimate of docs/algorithms.md: with
// `queued` requests of this key already waiting, the request is ready at
// (idx + 1) * W + floor(queued / L) * W, so that waiting requests spread
// over the following windows. Otherwise the decision's retry_after_ms.
std::int64_t DelayFor(const rules::RuleConfig& rule, const algorithms::Decision& decision,
                      std::size_t queued, std::int64_t now_ms);

}  // namespace tollgate::gateway
