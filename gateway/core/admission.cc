#include "gateway/core/admission.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "gateway/core/adaptive_upstream.h"
#include "gateway/core/block_table.h"
#include "gateway/core/fair_places.h"
#include "gateway/core/upstream_limits.h"
#include "gateway/core/gateway_state.h"
#include "gateway/core/settlement.h"
#include "gateway/core/upstream_wait.h"
#include "gateway/telemetry/metrics.h"
#include "store/coordinator.h"
#include "store/store.h"
#include "base/loop_time.h"

namespace tollgate::gateway {
namespace {

// One Coordinator call awaited by a request: pass it as the call's sink,
// then Wait(). The answer may come inline or later on this thread.
class CountCall final : public store::CountSink {
 public:
  explicit CountCall(const Executor& executor) : timer_(executor) {}
  CountCall(const CountCall&) = delete;
  CountCall& operator=(const CountCall&) = delete;
  void OnCount(const store::CountResult& result) override {
    result_ = result;
    done_ = true;
    timer_.cancel();
  }
  // Resumes once answered.
  Task<store::CountResult> Wait() {
    while (!done_) {
      timer_.expires_at(Timer::time_point::max());
      co_await timer_.async_wait(kUseTuple);
    }
    co_return result_;
  }

 private:
  bool done_ = false;
  store::CountResult result_;
  Timer timer_;
};

}  // namespace

// Resumes the request awaiting a DecisionBatch: its timer waits "forever"
// and the last decision cancels it.
class Admission::BatchWait final : public BatchWaker {
 public:
  explicit BatchWait(const Executor& executor) : timer_(executor) {}
  void Wake() override { timer_.cancel(); }
  Task<void> Wait(const DecisionBatch& batch) {
    while (!batch.done()) {
      timer_.expires_at(Timer::time_point::max());
      co_await timer_.async_wait(kUseTuple);
    }
  }

 private:
  Timer timer_;
};

Admission::Admission(const CoreServices& services)
    : services_(services), batch_wait_(std::make_unique<BatchWait>(services.executor)) {
  batch_.set_waker(batch_wait_.get());
}

Admission::~Admission() = default;

LimitContext MakeLimitContext(const GatewayState& state, store::Store& store,
                              ThreadMetrics* metrics) {
  const rules::StoreConfig& config = state.config->store;
  LimitContext context{*state.identity, *state.rule_set, store, 0, 0};
  context.metrics = metrics;
  context.rule_ids = &state.rule_ids;
  context.rules_base = state.config->rules.data();
  context.store_kind =
      config.kind == rules::StoreKind::kRedis ? StoreKindLabel::kRedis : StoreKindLabel::kLocal;
  context.describe = state.access_log != nullptr && state.access_log->enabled();
  RestampLimitContext(state, context);
  return context;
}

void RestampLimitContext(const GatewayState& state, LimitContext& context) {
  const store::Clock& clock = *state.clock;
  const rules::StoreConfig& config = state.config->store;
  const bool wall_clock =
      config.kind == rules::StoreKind::kRedis && config.redis.time == store::RedisTime::kClient;
  context.now_ms = clock.NowMs();
  context.store_now_ms = wall_clock ? clock.UnixMs() : context.now_ms;
  const bool overrides = state.overrides != nullptr && state.overrides->Current() != nullptr;
  context.overrides = overrides ? state.overrides : nullptr;
  context.unix_ms = wall_clock ? context.store_now_ms : clock.UnixMs();
}

Task<void> Admission::WaitForBatch() { co_await batch_wait_->Wait(batch_); }

Task<store::CountResult> Admission::Coordinate(CoordinatorCall call) {
  const Executor executor = co_await asio::this_coro::executor;
  CountCall answer(executor);
  call(*services_.coordinator, answer);
  co_return co_await answer.Wait();
}

Admit Admission::StartRequest(const GatewayState& state, const rules::RequestFacts& facts,
                              const rules::Identity& identity, Exchange& ex, Answer& answer,
                              BodyCost body_cost) {
  if (state.waits) {
    wait_class_ = {
        .flow = FlowOf(identity), .weight = state.WeightOf(identity.role), .priority = ex.priority};
  }
  body_costs_.rewritten.reset();
  body_costs_.model.clear();
  // Blocks come before any rule (and cost one atomic load while none exists).
  if (const rules::BlockList* blocks = state.blocks != nullptr ? state.blocks->Current() : nullptr) {
    const std::int64_t now = state.clock->UnixMs();
    if (const rules::Block* block = blocks->Match(identity, *facts.headers, now)) {
      answer = RefuseWithStatus(Refusal::kBlocked, block->status,
                                (block->expires_unix_ms - now + 999) / 1000);
      return Admit::kRefused;
    }
  }
  const LimitContext context = MakeLimitContext(state, *services_.store, services_.metrics);
  LimitOutcome& outcome = ex.limits;
  descriptor_limit_.reset();
  if (facts.descriptor_limit != nullptr) descriptor_limit_ = *facts.descriptor_limit;
  request_cost_ = facts.cost;
  if (context.metrics != nullptr) asked_ = store::LoopNow();
  const LimitStart start = StartLimits(context, facts, identity, evaluation_, hits_, batch_, outcome);
  if (start == LimitStart::kNeedsBody) {
    if (body_cost == BodyCost::kAsk) return Admit::kNeedsBody;
    return ContinueWithBody(state, {}, ex, answer);
  }
  decided_ = start == LimitStart::kDecided;
  return Started(context, ex, answer);
}

Admit Admission::ContinueWithBody(const GatewayState& state, std::string_view body, Exchange& ex,
                                  Answer& answer) {
  const LimitContext context = MakeLimitContext(state, *services_.store, services_.metrics);
  CostsFromBody(evaluation_.hits, body, state.config->prices, body_costs_);
  // A rule whose json:PATH key part the body lacks does not apply.
  hits_.clear();
  for (const rules::RuleHit& hit : evaluation_.hits) {
    if (!hit.key.empty()) hits_.push_back(&hit);
  }
  if (context.metrics != nullptr) asked_ = store::LoopNow();
  batch_.Start(context, hits_, request_cost_, {},
               descriptor_limit_ ? &*descriptor_limit_ : nullptr);
  decided_ = false;
  return Started(context, ex, answer);
}

Admit Admission::Started(const LimitContext& context, Exchange& ex, Answer& answer) {
  LimitOutcome& outcome = ex.limits;
  if (!decided_) {
    if (!batch_.done()) return Admit::kPending;
    if (context.metrics != nullptr) {
      context.metrics->RecordStore(context.store_kind, std::chrono::duration<double>(
                                                           store::LoopNow() - asked_)
                                                           .count());
    }
    FinishLimits(context, hits_, batch_, outcome);
    decided_ = true;
  }
  ex.ratelimit = outcome.log;
  if (outcome.shown != nullptr && context.describe) ex.limit_key = outcome.shown->KeyKind();
  return Judge(ex, answer);
}

void Admission::RefundUnforwarded(const GatewayState& state, Exchange& ex) {
  // Watched (ObserveResponse: the upstream was asked, and never reached):
  // Arm counted the reservations already.
  RefundReservations(state, services_, ex,
                     ex.body_observer != nullptr ? Reserved::kCounted : Reserved::kCount);
}

void Admission::DisarmSettlement() {
  settlement_->Disarm();
  if (services_.settlements != nullptr) services_.settlements->Give(std::move(settlement_));
}

void Admission::ArmSettlement(const GatewayState& state, Exchange& ex) {
  if (!settlement_) {
    settlement_ = services_.settlements != nullptr ? services_.settlements->Take(services_)
                                                   : std::make_unique<Settlement>(services_);
  }
  settlement_->Arm(state, ex, body_costs_.model);
}

Admit Admission::Judge(Exchange& ex, Answer& answer) const {
  const LimitOutcome& outcome = ex.limits;
  switch (outcome.verdict) {
    case Verdict::kUnauthorized:
      answer = Refuse(Refusal::kUnauthorized);
      return Admit::kRefused;
    case Verdict::kStoreUnavailable:
      // on_error = "deny": fail closed while the store cannot decide.
      answer = Refuse(Refusal::kStoreUnavailable, 1);
      return Admit::kRefused;
    case Verdict::kReject:
      answer = Limited(*outcome.shown, outcome.shown_decision);
      // Retrying would not help: said so, and no Retry-After. (The rule
      // and decision stay for the decision service's verdict.)
      if (outcome.beyond_capacity) answer.refusal = Refusal::kCostBeyondCapacity;
      return Admit::kRefused;
    case Verdict::kDelay:
      return Admit::kPending;
    case Verdict::kForward:
      break;
  }
  if (outcome.delay_ms > 0 || !evaluation_.inflight.empty()) return Admit::kPending;
  return Admit::kAdmitted;
}

Task<Admit> Admission::FinishRequest(const GatewayState& state, ClientWatch& client,
                                     Exchange& ex, Answer& answer) {
  const LimitContext context = MakeLimitContext(state, *services_.store, services_.metrics);
  LimitOutcome& outcome = ex.limits;
  if (!decided_) {
    co_await WaitForBatch();
    if (context.metrics != nullptr) {
      context.metrics->RecordStore(context.store_kind, std::chrono::duration<double>(
                                                           store::LoopNow() - asked_)
                                                           .count());
    }
    FinishLimits(context, hits_, batch_, outcome);
    decided_ = true;
    ex.ratelimit = outcome.log;
    if (outcome.shown != nullptr && context.describe) ex.limit_key = outcome.shown->KeyKind();
    const Admit judged = Judge(ex, answer);
    if (judged != Admit::kPending) co_return judged;
  }
  if (outcome.verdict == Verdict::kDelay) {
    // (GCC 12 miscompiles co_await inside && and ?: : keep it a statement.)
    // Counts the request in tollgate_delayed_requests while it is held.
    const GaugeScope gauge(services_.metrics, &ThreadMetrics::AddDelayed);
    const Turn turn = co_await WaitForTurn(state, client, ex);
    if (turn == Turn::kClientGone) co_return Admit::kClientGone;
    if (turn == Turn::kRejected) {
      outcome.verdict = Verdict::kReject;
      answer = Limited(*outcome.shown, outcome.shown_decision);
      co_return Admit::kRefused;
    }
  }
  if (outcome.delay_ms > 0) {
    // Shaping (leaky_bucket without nodelay). A timer, not a thread: the
    // worker serves others meanwhile.
    const Executor executor = co_await asio::this_coro::executor;
    Timer turn(executor, Ms(outcome.delay_ms));
    // Counts the request in tollgate_delayed_requests while it is held.
    const GaugeScope gauge(services_.metrics, &ThreadMetrics::AddDelayed);
    co_await turn.async_wait(kUseTuple);
  }
  if (!evaluation_.inflight.empty()) {
    const rules::RuleConfig* refused = nullptr;
    const Place place = co_await AcquirePlaces(state, context, client, ex, refused);
    ex.ratelimit = outcome.log;
    if (place == Place::kClientGone) co_return Admit::kClientGone;
    if (place == Place::kStoreDown) {
      answer = Refuse(Refusal::kStoreUnavailable, 1);
      co_return Admit::kRefused;
    }
    if (place == Place::kRefused) {
      answer = RefuseWithStatus(Refusal::kTooManyInflight, refused->status, 1);
      co_return Admit::kRefused;
    }
  }
  co_return Admit::kAdmitted;
}

AdaptiveUpstream* Admission::AdaptiveOf(const GatewayState& state,
                                        const rules::UpstreamConfig& upstream) {
  if (!upstream.adaptive) return nullptr;
  const auto index = static_cast<std::size_t>(&upstream - state.config->upstreams.data());
  return state.upstream_adaptive[index].get();
}

Admit Admission::StartUpstream(const GatewayState& state, const rules::UpstreamConfig& upstream,
                               Exchange& ex) {
  AdaptiveUpstream* const adaptive = AdaptiveOf(state, upstream);
  if (upstream.max_connections > 0 || adaptive != nullptr) {
    const std::int64_t max = adaptive != nullptr ? adaptive->limit() : upstream.max_connections;
    std::int64_t* const held = adaptive != nullptr ? &ex.adaptive_inflight : nullptr;
    ex.upstream_place = state.upstream_places->TryAcquire(upstream.name, max, held);
    if (!ex.upstream_place) return Admit::kPending;
    ex.adaptive = adaptive;
  }
  return upstream.learn_limits ? Admit::kPending : Admit::kAdmitted;
}

Task<Admit> Admission::FinishUpstream(const GatewayState& state,
                                      const rules::UpstreamConfig& upstream, std::string_view route,
                                      std::string_view path, Exchange& ex, Answer& answer) {
  AdaptiveUpstream* const adaptive = AdaptiveOf(state, upstream);
  if ((upstream.max_connections > 0 || adaptive != nullptr) && !ex.upstream_place) {
    const std::int64_t max = adaptive != nullptr ? adaptive->limit() : upstream.max_connections;
    // (GCC 12 miscompiles co_await inside a condition: a statement.)
    const bool got =
        co_await WaitForUpstreamPlace(*state.upstream_places, upstream, max,
                                      static_cast<std::size_t>(state.config->limits.max_waiting),
                                      ClassOf(nullptr), services_.metrics, ex);
    if (!got) {
      answer = RefuseWithStatus(Refusal::kUpstreamBusy,
                                static_cast<unsigned>(upstream.max_connections_status), 1);
      co_return Admit::kRefused;
    }
    ex.adaptive_inflight = max;  // it waited: every place was held
    ex.adaptive = adaptive;
  }
  if (upstream.learn_limits) {
    learned_bucket_ = LearnedBucketOf(upstream, route, path);
    co_return co_await WaitForUpstreamLimit(state, upstream, answer);
  }
  co_return Admit::kAdmitted;
}

Task<Admit> Admission::WaitForUpstreamLimit(const GatewayState& state,
                                            const rules::UpstreamConfig& upstream,
                                            Answer& answer) {
  const store::Clock& clock = *state.clock;
  const std::int64_t deadline = clock.NowMs() + upstream.learn_max_delay_ms;
  const Executor executor = co_await asio::this_coro::executor;
  Timer timer(executor);
  std::optional<GaugeScope> gauge;  // tollgate_delayed_requests while it waits
  for (;;) {
    const std::int64_t now = clock.NowMs();
    const store::CountResult checked =
        co_await Coordinate([&](store::Coordinator& c, store::CountSink& sink) {
          c.CheckLearned(upstream.name, learned_bucket_, now, sink);
        });
    if (checked.status != store::StoreStatus::kOk) {
      if (checked.source != store::ResultSource::kPolicyDenied) co_return Admit::kAdmitted;
      answer = Refuse(Refusal::kStoreUnavailable, 1);
      co_return Admit::kRefused;
    }
    const std::int64_t wait = checked.value;
    if (wait == 0) co_return Admit::kAdmitted;
    if (now + wait > deadline) {
      // The upstream would refuse it: answer for it, as it would.
      answer = Refuse(Refusal::kUpstreamRateLimited, (wait + 999) / 1000);
      co_return Admit::kRefused;
    }
    if (!gauge) gauge.emplace(services_.metrics, &ThreadMetrics::AddDelayed);
    timer.expires_after(Ms(wait));
    co_await timer.async_wait(kUseTuple);
  }
}

void Admission::Learn(const GatewayState& state, const rules::UpstreamConfig& upstream,
                      unsigned status, const Fields& fields) {
  const store::Clock& clock = *state.clock;
  const algorithms::LearnedFacts facts = ReadLearnedFacts(status, fields, clock.UnixMs());
  services_.coordinator->Learn(upstream.name, learned_bucket_, facts, clock.NowMs());
}

}  // namespace tollgate::gateway
