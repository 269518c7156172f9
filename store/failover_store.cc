#include "store/failover_store.h"

#include <algorithm>
#include <utility>

#include "algorithms/validate.h"

namespace tollgate::store {
namespace {

// The answer of a policy that does not ask another store.
algorithms::Decision PolicyDecision(FailurePolicy policy, const LimitSpec& limit) {
  algorithms::Decision d;
  if (policy == FailurePolicy::kAllow) {
    d.allowed = true;
    d.remaining = limit.windows.front().limit;
  } else {
    d.allowed = false;
    d.retry_after_ms = 1000;
  }
  return d;
}

// Whether `policy` has the fallback decide (kShare with shares of the
// limits).
bool AsksTheFallback(FailurePolicy policy) {
  return policy == FailurePolicy::kLocal || policy == FailurePolicy::kShare;
}

ResultSource PolicySource(FailurePolicy policy) {
  switch (policy) {
    case FailurePolicy::kAllow:
      return ResultSource::kPolicyAllowed;
    case FailurePolicy::kDeny:
      return ResultSource::kPolicyDenied;
    case FailurePolicy::kLocal:
    case FailurePolicy::kShare:
      break;
  }
  return ResultSource::kFallback;
}

// Keeps the inline answer of a LocalCoordinator call.
struct Kept final : CountSink {
  CountResult result;
  void OnCount(const CountResult& r) override { result = r; }
};

}  // namespace

// One decision in flight through the primary: what the fallback needs to
// decide it again, and whom to answer.
struct FailoverStore::Call final : DecisionSink {
  FailoverStore* owner = nullptr;
  DecisionSink* target = nullptr;
  std::string key;  // reused capacity
  const LimitSpec* limit = nullptr;
  std::int64_t cost = 1;
  std::int64_t now_ms = 0;
  std::uint32_t partition = 0;
  // A settle's: a failure is passed on (its reservation stays where it
  // was made), not answered by the policy.
  bool settle = false;

  void OnDecision(const StoreResult& result) override { owner->Finish(this, result); }
};

namespace {

// A record not in flight from `free`, or a new one kept in `calls` for
// `owner`: the decorators' calls allocate nothing once warm.
template <typename Call, typename Owner>
Call* TakeCall(std::vector<std::unique_ptr<Call>>& calls, std::vector<Call*>& free, Owner* owner) {
  if (free.empty()) {
    calls.push_back(std::make_unique<Call>());
    calls.back()->owner = owner;
    return calls.back().get();
  }
  Call* call = free.back();
  free.pop_back();
  return call;
}

}  // namespace

FailoverStore::FailoverStore(std::unique_ptr<Store> primary, LocalStore& fallback,
                             FailurePolicy policy, FailureObserver* observer,
                             const Clock* fallback_clock, const FleetSize* fleet)
    : fallback_(fallback),
      policy_(policy),
      observer_(observer),
      fallback_clock_(fallback_clock),
      fleet_(fleet),
      primary_(std::move(primary)) {}

FailoverStore::~FailoverStore() { primary_.reset(); }

FailoverStore::Call* FailoverStore::Take() { return TakeCall(calls_, free_, this); }

void FailoverStore::Decide(const DecideRequest& request, DecisionSink& sink) {
  Call* call = Take();
  call->target = &sink;
  call->key.assign(request.key);
  call->limit = request.limit;
  call->cost = request.cost;
  call->now_ms = request.now_ms;
  call->partition = request.partition;
  call->settle = false;
  primary_->Decide(request, *call);
}

void FailoverStore::Settle(const SettleRequest& request, DecisionSink& sink) {
  const DecideRequest& r = request.reservation;
  switch (request.reserved_by) {
    case ResultSource::kPrimary: {
      Call* call = Take();
      call->target = &sink;
      call->settle = true;
      primary_->Settle(request, *call);
      return;
    }
    case ResultSource::kFallback: {
      // Reserved on the fallback during an outage: settled there, on the
      // share it was reserved from (kShare) and on the fallback's time.
      const LimitSpec& limit = policy_ == FailurePolicy::kShare ? Share(*r.limit) : *r.limit;
      SettleRequest local = request;
      local.reservation.limit = &limit;
      if (OnFallbackClock(limit)) {
        const std::int64_t now = fallback_clock_->NowMs();
        local.reservation.now_ms = now - std::max<std::int64_t>(0, request.now_ms - r.now_ms);
        local.now_ms = now;
      }
      sink.OnDecision({StoreStatus::kOk, ResultSource::kFallback, fallback_.SettleNow(local)});
      return;
    }
    case ResultSource::kPolicyAllowed:
    case ResultSource::kPolicyDenied:
      break;
  }
  // Nothing was held: nothing to settle.
  sink.OnDecision(
      {StoreStatus::kOk, request.reserved_by, PolicyDecision(FailurePolicy::kAllow, *r.limit)});
}

void FailoverStore::Finish(Call* call, const StoreResult& result) {
  DecisionSink& target = *call->target;
  if (result.status == StoreStatus::kOk) {
    PrimaryAnswered();
    free_.push_back(call);
    target.OnDecision(result);
    return;
  }
  if (call->settle) {
    // The reservation stays on the primary as it was (as a response that
    // never said its cost keeps it). No policy answered: not counted as
    // a fallback; the caller sees the status.
    free_.push_back(call);
    target.OnDecision(result);
    return;
  }
  const StoreResult answer = PolicyAnswer(
      {call->key, call->limit, call->cost, call->now_ms, call->partition}, result.status);
  free_.push_back(call);
  target.OnDecision(answer);
}

void FailoverStore::DecideFailed(const DecideRequest& request, StoreStatus status,
                                 DecisionSink& sink) {
  sink.OnDecision(PolicyAnswer(request, status));
}

StoreResult FailoverStore::PolicyAnswer(const DecideRequest& request, StoreStatus status) {
  if (observer_ != nullptr) observer_->OnStoreFailure(status, policy_);
  StoreResult answer;
  answer.source = PolicySource(policy_);
  if (AsksTheFallback(policy_)) {
    const LimitSpec& limit =
        policy_ == FailurePolicy::kShare ? Share(*request.limit) : *request.limit;
    // A request costing more than the share can ever hold is refused as
    // "deny" refuses, rather than told a wait that never ends.
    if (algorithms::ValidateCost(limit.windows, request.cost)) {
      answer.status = status;
      answer.source = ResultSource::kPolicyDenied;
      answer.decision = PolicyDecision(FailurePolicy::kDeny, limit);
      return answer;
    }
    // The rule's own partition of the local store, as when it is the store.
    const std::int64_t now = OnFallbackClock(limit) ? fallback_clock_->NowMs() : request.now_ms;
    answer.decision =
        fallback_.DecideNow({request.key, &limit, request.cost, now, request.partition});
    return answer;
  }
  answer.status = status;
  answer.decision = PolicyDecision(policy_, *request.limit);
  return answer;
}

const LimitSpec& FailoverStore::Share(const LimitSpec& limit) {
  // The fleet's size as the outage began: a count that changes during it
  // (heartbeats getting through while decisions do not, a gateway dying)
  // would start every share afresh, admitting more than the limit.
  if (outage_gateways_ == 0) outage_gateways_ = fleet_ != nullptr ? fleet_->Get() : 1;
  const std::int64_t gateways = outage_gateways_;
  const auto id = std::make_pair(limit.fingerprint, gateways);
  auto it = shares_.find(id);
  if (it != shares_.end() && it->second.of == limit.windows) return it->second.share;
  if (shares_.size() >= kMaxShares) shares_.clear();
  MadeShare& made = shares_[id];
  made = {limit.windows, ShareOf(limit, gateways)};
  return made.share;
}

// One coordinator call in flight through the primary: its arguments, to make
// it again on the fallback, and whom to answer.
struct FailoverCoordinator::Call final : CountSink {
  enum class Kind : std::uint8_t { kCheckLearned, kAcquirePlace, kEnterQueue };
  FailoverCoordinator* owner = nullptr;
  CountSink* target = nullptr;
  Kind kind = Kind::kCheckLearned;
  std::string first, second;  // upstream and bucket, or key (reused capacity)
  std::int64_t number = 0;    // max (places), ttl_ms (lines)
  std::int64_t now_ms = 0;
  InflightGuard* guard = nullptr;

  void OnCount(const CountResult& result) override {
    if (owner != nullptr) {
      owner->Finish(this, result);
      return;
    }
    // Outlived its decorator (see ~FailoverCoordinator): passed on as is.
    const std::unique_ptr<Call> self(this);
    target->OnCount(result);
  }
};

FailoverCoordinator::FailoverCoordinator(std::unique_ptr<Coordinator> primary,
                                         LocalCoordinator& fallback, FailurePolicy policy,
                                         FailureObserver* observer)
    : fallback_(fallback), policy_(policy), observer_(observer), primary_(std::move(primary)) {}

FailoverCoordinator::~FailoverCoordinator() {
  primary_.reset();
  // A Redis coordinator's calls wait in its RedisStore, which outlives it
  // (and completes them when it goes): the records still in flight then
  // outlive this decorator, answer as the primary did and delete themselves.
  std::sort(free_.begin(), free_.end());
  for (std::unique_ptr<Call>& call : calls_) {
    if (std::binary_search(free_.begin(), free_.end(), call.get())) continue;
    Call* detached = call.release();
    detached->owner = nullptr;
  }
}

FailoverCoordinator::Call* FailoverCoordinator::Take() { return TakeCall(calls_, free_, this); }

void FailoverCoordinator::CheckLearned(std::string_view upstream, std::string_view bucket,
                                       std::int64_t now_ms, CountSink& sink) {
  Call* call = Take();
  call->target = &sink;
  call->kind = Call::Kind::kCheckLearned;
  call->first.assign(upstream);
  call->second.assign(bucket);
  call->now_ms = now_ms;
  call->guard = nullptr;
  primary_->CheckLearned(upstream, bucket, now_ms, *call);
}

void FailoverCoordinator::Learn(std::string_view upstream, std::string_view bucket,
                                const algorithms::LearnedFacts& facts, std::int64_t now_ms) {
  primary_->Learn(upstream, bucket, facts, now_ms);
  if (AsksTheFallback(policy_)) {
    fallback_.Learn(upstream, bucket, facts, now_ms);
  }
}

void FailoverCoordinator::AcquirePlace(std::string_view key, std::int64_t max, std::int64_t now_ms,
                                       InflightGuard& place, CountSink& sink) {
  Call* call = Take();
  call->target = &sink;
  call->kind = Call::Kind::kAcquirePlace;
  call->first.assign(key);
  call->number = max;
  call->now_ms = now_ms;
  call->guard = &place;
  primary_->AcquirePlace(key, max, now_ms, place, *call);
}

void FailoverCoordinator::EnterQueue(std::string_view key, std::int64_t ttl_ms,
                                     InflightGuard& ticket, CountSink& sink) {
  Call* call = Take();
  call->target = &sink;
  call->kind = Call::Kind::kEnterQueue;
  call->first.assign(key);
  call->number = ttl_ms;
  call->guard = &ticket;
  primary_->EnterQueue(key, ttl_ms, ticket, *call);
}

void FailoverCoordinator::Finish(Call* call, const CountResult& result) {
  CountSink& target = *call->target;
  if (result.status == StoreStatus::kOk) {
    free_.push_back(call);
    target.OnCount(result);
    return;
  }
  if (observer_ != nullptr) observer_->OnStoreFailure(result.status, policy_);
  CountResult answer;
  if (AsksTheFallback(policy_)) {
    // LocalCoordinator answers inline.
    Kept kept;
    switch (call->kind) {
      case Call::Kind::kCheckLearned:
        fallback_.CheckLearned(call->first, call->second, call->now_ms, kept);
        break;
      case Call::Kind::kAcquirePlace:
        fallback_.AcquirePlace(call->first, call->number, call->now_ms, *call->guard, kept);
        break;
      case Call::Kind::kEnterQueue:
        fallback_.EnterQueue(call->first, call->number, *call->guard, kept);
        break;
    }
    answer = kept.result;
  } else {
    answer.status = result.status;
  }
  answer.source = PolicySource(policy_);
  free_.push_back(call);
  target.OnCount(answer);
}

}  // namespace tollgate::store
