// Phase admit: every limit a request passes before tollgate forwards it —
// the rate rules (reject, delay, shaping), the concurrency rules'
// places (max_inflight), and right before the upstream exchange the
// upstream's own cap (max_connections) and the limits learned from its
// answers (learn_limits). Decisions are the store's and coordinator's
// (asynchronous, maybe inline); waits are timers on the worker's loop. What
// it decides and the places it holds go into the Exchange; a refusal comes
// back as an Answer for the protocol adapter to write. The pure decisions
// are gateway/core/limits.h's. Heavy (Asio): include only from gateway
// implementation files. One Admission per request in flight at a time
// (its scratch is reused by the next); worker thread only.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/core/exchange.h"
#include "gateway/core/fair_queue.h"
#include "gateway/core/limits.h"
#include "gateway/core/request_cost.h"
#include "gateway/core/respond.h"
#include "gateway/core/services.h"
#include "gateway/io/io_types.h"
#include "rules/rule_set.h"

namespace tollgate::rules {
struct UpstreamConfig;
}  // namespace tollgate::rules

namespace tollgate::gateway {

struct GatewayState;
class Settlement;

// How admit waits while it watches the request's client: each protocol
// knows what "the client left" means (HTTP/1.1: the connection closed;
// HTTP/2: the stream was reset).
class ClientWatch {
 public:
  enum class Held { kElapsed, kClientGone };
  // Waits until `timer` expires or is cancelled (kElapsed), unless the
  // client leaves first. The caller owns the timer: cancelling it (the
  // turn passed to the request, gateway/core/waiting_room.h) ends the wait.
  virtual Task<Held> Hold(Timer& timer) = 0;

 protected:
  ~ClientWatch() = default;
};

// The context in which `state`'s rules are decided on `store` now: both
// clocks (Redis with time = "client" decides on wall-clock time, shared by
// the gateways, not on each process's monotonic scale), the metric ids and
// the store's label. `metrics`: this worker's, null when off. describe is
// on when the access log is.
LimitContext MakeLimitContext(const GatewayState& state, store::Store& store,
                              ThreadMetrics* metrics);

// What of MakeLimitContext's `context` changes with time (the clocks, the
// overrides in force) made current again, for a context kept across
// decisions of the same rules (a WebSocket tunnel's messages).
void RestampLimitContext(const GatewayState& state, LimitContext& context);

enum class Admit {
  kAdmitted,    // go on; the places taken are in the Exchange
  kRefused,     // the answer says what to write
  kClientGone,  // the client left while the request waited: write nothing
  kPending,     // StartRequest only: FinishRequest has the answer
  kNeedsBody,   // StartRequest only: a rule's cost comes from the request
                // body; read it, then ContinueWithBody
};

// Where StartRequest takes a cost that a rule reads from the request body
// when the caller has no body to give (the check endpoint, an RLS call):
// kDefault charges such rules their cost_default instead of asking for it.
enum class BodyCost { kAsk, kDefault };

class Admission {
 public:
  explicit Admission(const CoreServices& services);
  ~Admission();
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;

  // Blocks (gateway/core/block_table.h), then the rate rules, then
  // shaping, then a place for each concurrency rule
  // (taken after any wait: a held request does not occupy one). Fills
  // ex.limits, ex.ratelimit and ex.limit_key. kRefused: the block's status
  // (blocked), 401 (invalid token), 503 (on_error = "deny"), the limiting rule's answer (also for
  // a delayed request that cannot be served within max_delay or finds the
  // waiting room full), or too_many_inflight.
  // In two steps, so that the usual request costs no coroutine here:
  // StartRequest decides what needs no wait (every decision came inline,
  // nothing to hold); kPending: co_await FinishRequest for the rest.
  // `facts` and `identity` are read by StartRequest only.
  Admit StartRequest(const GatewayState& state, const rules::RequestFacts& facts,
                     const rules::Identity& identity, Exchange& ex, Answer& answer,
                     BodyCost body_cost = BodyCost::kAsk);
  // After kNeedsBody: the rules' costs from `body` (the request's whole
  // body, within max_body_bytes), then as StartRequest goes on. An LLM
  // preset may need the request rewritten: RewrittenBody() then has the
  // body to forward instead.
  Admit ContinueWithBody(const GatewayState& state, std::string_view body, Exchange& ex,
                         Answer& answer);
  // The body to forward in place of the client's (an output bound or a
  // stream's usage asked for by an LLM preset); nullopt: as sent. Taken.
  std::optional<std::string> TakeRewrittenBody() { return std::move(body_costs_.rewritten); }
  // For an admitted request: when a rule that settles reserved units for
  // it, the response is watched for its real cost and settled when it
  // ends (gateway/core/settlement.h; ex.body_observer). Cheap otherwise.
  void ObserveResponse(const GatewayState& state, Exchange& ex) {
    if (!ex.limits.reserved.empty()) ArmSettlement(state, ex);
  }
  // An admitted request that never reached the upstream (refused on the
  // way, or its body failed): what its rules reserved settles to 0
  // (RefundReservations, settlement.h).
  void RefundUnforwarded(const GatewayState& state, Exchange& ex);
  // The exchange has ended: what ObserveResponse watched is done with.
  void EndExchange() {
    if (settlement_) DisarmSettlement();
  }
  Task<Admit> FinishRequest(const GatewayState& state, ClientWatch& client, Exchange& ex,
                            Answer& answer);

  // Right before the upstream exchange: a place towards `upstream` (its
  // max_connections, waiting up to max_connections_delay) into
  // ex.upstream_place, and with learn_limits, a wait while its learned
  // limits for (route, path) say it would refuse (up to learn_max_delay).
  // In two steps, so that a place free at once costs no coroutine:
  // StartUpstream takes it if it can (kAdmitted); kPending: co_await
  // FinishUpstream for the rest. kRefused: upstream_busy,
  // upstream_rate_limited or store_unavailable.
  Admit StartUpstream(const GatewayState& state, const rules::UpstreamConfig& upstream,
                      Exchange& ex);
  Task<Admit> FinishUpstream(const GatewayState& state, const rules::UpstreamConfig& upstream,
                             std::string_view route, std::string_view path, Exchange& ex,
                             Answer& answer);

  // learn_limits: what the upstream's response to the request admitted by
  // StartUpstream says of its limits, for the requests after it. With
  // on_error = "local", the Redis coordinator's decorator teaches the
  // process's own coordinator too.
  void Learn(const GatewayState& state, const rules::UpstreamConfig& upstream, unsigned status,
             const Fields& fields);

  // The per = "message" rules the last request matched, with their keys: a
  // WebSocket handshake's tunnel decides its messages by them. Valid until
  // the next StartRequest.
  std::span<const rules::RuleHit> message_rules() const { return evaluation_.messages; }

 private:
  class BatchWait;
  Task<void> WaitForBatch();
  // The rate rules' verdict once decided: kRefused with its answer,
  // kPending when the request must wait (delay, shaping, places), or
  // kAdmitted.
  Admit Judge(Exchange& ex, Answer& answer) const;
  using CoordinatorCall = std::function<void(store::Coordinator&, store::CountSink&)>;
  // Runs `call` on this worker's coordinator and awaits its answer (with
  // Redis, on_error answers for it when Redis cannot).
  Task<store::CountResult> Coordinate(CoordinatorCall call);
  enum class Turn { kReady, kRejected, kClientGone };
  // Holds a request limited by delay rules until they allow it. kRejected:
  // it cannot be served within max_delay or the waiting room is full
  // (outcome.shown says by which rule).
  Task<Turn> WaitForTurn(const GatewayState& state, ClientWatch& client, Exchange& ex);
  enum class Place { kAdmitted, kRefused, kStoreDown, kClientGone };
  // A place for each concurrency rule, into ex.limits.inflight, waiting
  // (watching `client`) in the rule's line of the waiting room for up to
  // its max_delay; `refused` says by which rule when kRefused.
  Task<Place> AcquirePlaces(const GatewayState& state, const LimitContext& context,
                            ClientWatch& client, Exchange& ex, const rules::RuleConfig*& refused);
  // The request's place in the fair order of a wait: its client (or
  // `hit`'s fair_key, when the rule has one), weight and priority.
  WaitClass ClassOf(const rules::RuleHit* hit) const;
  // `upstream`'s adaptive limit; null when its concurrency is not adaptive.
  static AdaptiveUpstream* AdaptiveOf(const GatewayState& state,
                                      const rules::UpstreamConfig& upstream);
  Task<Admit> WaitForUpstreamLimit(const GatewayState& state,
                                   const rules::UpstreamConfig& upstream, Answer& answer);

  // StartRequest's and ContinueWithBody's end, once the batch is started.
  Admit Started(const LimitContext& context, Exchange& ex, Answer& answer);
  void ArmSettlement(const GatewayState& state, Exchange& ex);
  void DisarmSettlement();

  const CoreServices& services_;
  rules::Evaluation evaluation_;  // reused between requests
  BodyCosts body_costs_;          // ContinueWithBody's
  std::int64_t request_cost_ = 0;  // StartRequest's facts.cost, for ContinueWithBody
  std::unique_ptr<Settlement> settlement_;  // made for the first request that settles
  std::vector<const rules::RuleHit*> hits_;
  DecisionBatch batch_;
  std::unique_ptr<BatchWait> batch_wait_;
  bool decided_ = false;  // StartRequest's decisions are in ex.limits
  // The request's RLS descriptor limit, for the decisions of a delayed one.
  std::optional<rules::DescriptorLimit> descriptor_limit_;
  std::chrono::steady_clock::time_point asked_;  // when they were asked (metrics)
  std::string learned_bucket_;                   // FinishUpstream's, for Learn
  // StartRequest's flow (FlowOf) and weight, for the waits after it; set
  // only when the configuration has waits (GatewayState::waits).
  WaitClass wait_class_;
};

}  // namespace tollgate::gateway
