// The request pipeline's sequence, written once for every client protocol:
// one exchange goes begin -> read the head -> check and canonicalize it ->
// route -> identify -> admit (with its waits) -> forward (or, on the decision
// listener, the check endpoint's answer) -> log, and is logged exactly once
// at its end whatever its outcome. What differs by protocol is the
// downstream's: the HTTP/1.1 connection (gateway/http1/connection.h) and the
// HTTP/2 stream (gateway/h2/adapter.cc) each supply the hooks below; the
// Envoy RLS call, a gRPC service rather than a proxied request, is its own
// small driver over the same admit and log steps (gateway/decision/).
//
// Static dispatch: ExchangeDriver<Down> calls Down's members directly (no
// virtual call, and the steps that need no wait are plain functions, so the
// one coroutine frame per exchange stays under the size Asio recycles). Down
// befriends ExchangeDriver<Down> and provides:
//
//   const GatewayState& BeginExchange();  // the configuration of this exchange
//   Exchange& exchange();  Answer& answer();  Admission& admission();
//   ClientWatch& watch();  ThreadMetrics* metrics();  std::string& canonical();
//   std::string_view peer_ip();  const rules::IpAddress& peer_address();
//   const rules::ClientCertificate* client_cert();
//   http::request_header<Fields>& request();
//   HeadRead TakeHead(Refusal&);        // the head from what was read already
//   Task<HeadRead> ReadHead(Refusal&);  // kNeedMore: the rest from the client
//                                       // (only where TakeHead can say so)
//   void OnHead(const GatewayState&, Exchange&);  // version, persistence, deadline
//   RequestHeaderCheck CheckHead();     // CheckRequestHeader in its protocol
//   void CloseAfterMalformed(Exchange&);  // a malformed head ends the connection?
//   bool IsCheckEndpoint();             // the decision listener's /check
//   bool BodyDeclaredTooLarge();        // beyond max_body_bytes by its length
//   void RefusedWithBodyUnread(Exchange&);  // refused before the body was read
//   void SkipBody(Exchange&);           // the check reads no body
//   bool UpgradeRefused(const rules::RouteConfig&);  // answer() set when true
//   Task<bool> ReadBodyForCost();       // a rule's cost is in the body: read
//                                       // it whole (false: failed, answered)
//   std::string_view BodyForCost();     // what it read
//   void ReplaceBody(std::string);      // forward this body instead
//   bool StartReply();                  // writes answer(); true when all written
//   Task<void> FinishReply();           // the rest of it
//   Task<void> WriteCheckAllowed();     // the check endpoint's 200
//   bool StartForward(const rules::RouteConfig&);  // false: refused, answer() set
//   bool ReadsBeforeUpstream();         // a body or 100 Continue comes first
//   Task<bool> ReadBeforeUpstream();    // false: failed (and answered)
//   std::string_view UpstreamTarget();  // the target the upstream's limits see
//   void RefusedBeforeUpstream(Exchange&);  // the upstream's admission refused
//   Task<void> ExchangeWithUpstream(const rules::RouteConfig&,
//                                   const rules::UpstreamConfig&);
//   void EndExchange(Exchange&);        // last facts before the log line
//   bool KeepsConnection(const Exchange&);  // another exchange may follow
//
// Heavy (Beast, Asio): include only from the protocol adapters' .cc files.
// Worker thread only.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "gateway/core/admission.h"
#include "gateway/core/check_endpoint.h"
#include "gateway/core/exchange.h"
#include "gateway/core/forward.h"
#include "gateway/core/gateway_state.h"
#include "gateway/core/http_util.h"
#include "gateway/core/identify.h"
#include "gateway/core/log.h"
#include "gateway/core/request_id.h"
#include "gateway/core/respond.h"
#include "gateway/telemetry/metrics.h"
#include "base/clock.h"

namespace tollgate::gateway {

// How reading a request's head went.
enum class HeadRead {
  kRead,        // the head is in request()
  kNeedMore,    // TakeHead only: ReadHead reads the rest
  kClientGone,  // nothing to answer and nothing to log
  kRefused,     // answered with the refusal it gave
};

template <class Down>
class ExchangeDriver {
 public:
  // One exchange on `down`, a connection that may carry more: true when it
  // may carry another.
  static Task<bool> Run(Down& down) { return Drive<bool>(down, nullptr); }
  // One exchange on `*owner`, which is freed when the exchange ends (an
  // HTTP/2 stream's exchange owns itself).
  static Task<void> RunOwned(std::unique_ptr<Down> owner) {
    Down& down = *owner;
    return Drive<void>(down, std::move(owner));
  }

 private:
  template <class Result>
  static Task<Result> Drive(Down& down, [[maybe_unused]] std::unique_ptr<Down> owner) {
    const GatewayState& state = down.BeginExchange();
    Exchange& ex = down.exchange();
    Begin(state, ex);
    Refusal refusal = Refusal::kBadRequest;
    HeadRead head = down.TakeHead(refusal);
    if constexpr (requires { down.ReadHead(refusal); }) {
      if (head == HeadRead::kNeedMore) head = co_await down.ReadHead(refusal);
    }
    if (head == HeadRead::kClientGone) {
      if constexpr (std::is_void_v<Result>) {
        co_return;
      } else {
        co_return false;
      }
    }
    const rules::RouteConfig* route = nullptr;
    Step step = Step::kReply;
    if (head == HeadRead::kRefused) {
      down.answer() = Refuse(refusal);
    } else {
      step = Prepare(down, state, ex, route);
    }
    const bool check = step == Step::kCheck;
    if (check) step = BeginCheck(down, state, ex);
    if (step == Step::kBody) {
      // A rule's cost is in the request body: read before admit decides.
      const bool read = co_await down.ReadBodyForCost();
      step = read ? ContinueWithBody(down, state, ex) : Step::kNone;
    }
    if (step == Step::kPending) {
      Admit admit =
          co_await down.admission().FinishRequest(state, down.watch(), ex, down.answer());
      if (check) admit = FinishCheck(state, admit, down.answer());
      step = Resolve(down, admit, ex);
    }
    if (step == Step::kReply) {
      if (!down.StartReply()) co_await down.FinishReply();
    } else if (step == Step::kForward && check) {
      co_await down.WriteCheckAllowed();
    } else if (step == Step::kForward) {
      // Forward: the request made the upstream's, what the client must send
      // first, the upstream's own admission, then the exchange.
      bool ready = down.StartForward(*route);
      if (!ready) {
        if (!down.StartReply()) co_await down.FinishReply();
      } else if (down.ReadsBeforeUpstream()) {
        ready = co_await down.ReadBeforeUpstream();
      }
      const rules::UpstreamConfig& upstream = state.config->upstreams[route->upstream_index];
      Admit admit = Admit::kAdmitted;
      if (ready && AdmitsUpstream(upstream)) {
        admit = down.admission().StartUpstream(state, upstream, ex);
        if (admit == Admit::kPending) {
          admit = co_await down.admission().FinishUpstream(
              state, upstream, route->name, UpstreamPath(down.UpstreamTarget()), ex, down.answer());
        }
      }
      // Refused on the way, or its body failed: the upstream never saw it.
      if (!ready || admit != Admit::kAdmitted) down.admission().RefundUnforwarded(state, ex);
      if (ready && admit != Admit::kAdmitted) {
        down.RefusedBeforeUpstream(ex);
        if (!down.StartReply()) co_await down.FinishReply();
      } else if (ready) {
        down.admission().ObserveResponse(state, ex);
        MarkUpstreamStart(state, route->upstream_index, down.metrics() != nullptr, ex);
        co_await down.ExchangeWithUpstream(*route, upstream);
        if (ex.upstream_unsent) down.admission().RefundUnforwarded(state, ex);
      }
    }
    if constexpr (std::is_void_v<Result>) {
      End(down, state, ex);
    } else {
      co_return End(down, state, ex);
    }
  }

  // What follows the steps that need no wait.
  enum class Step {
    kReply,    // answer() is the answer
    kCheck,    // the check endpoint answers (decision listener)
    kPending,  // admit waits: Admission::FinishRequest
    kForward,  // admitted
    kBody,     // admit needs the request body first (a rule's cost is in it)
    kNone,     // the client left, or was answered already: nothing to write
  };

  static void Begin(const GatewayState& state, Exchange& ex) {
    ex.Reset();
    const store::Instant start = state.clock->Now();
    ex.start_ms = start.ms;
    ex.started = start.steady;
    ex.deadline_ms = ex.start_ms + state.config->timeouts.request_ms;
  }

  // The head read: its checks, its canonical form, its route, identify and
  // what admit decides at once. A plain function: what it keeps (the header
  // check's strings, the Identification) stays off the coroutine frame.
  static Step Prepare(Down& down, const GatewayState& state, Exchange& ex,
                      const rules::RouteConfig*& route) {
    auto& req = down.request();
    Answer& answer = down.answer();
    AssignRequestId(*state.identity, down.peer_address(), req, ex.request_id);
    if (const AccessLog* log = state.access_log; log != nullptr && log->enabled()) {
      ex.method = req.method_string();
      ex.target = req.target();
      ex.user_agent = req[http::field::user_agent];
      ex.referer = req[http::field::referer];
    }
    down.OnHead(state, ex);
    const RequestHeaderCheck check = down.CheckHead();
    if (!check.problem.empty()) {
      down.CloseAfterMalformed(ex);
      answer = RefuseWith(check.status == http::status::bad_request ? Refusal::kBadRequest
                                                                     : Refusal::kNotImplemented,
                          check.problem);
      return Step::kReply;
    }
    std::string_view host = check.host;
    if (!check.origin_form.empty()) {
      // From here on, and to the upstream, as if sent in origin-form.
      req.set(http::field::host, check.authority);
      req.target(check.origin_form);
      host = req[http::field::host];
    }
    if (down.IsCheckEndpoint()) return Step::kCheck;
    if (down.BodyDeclaredTooLarge()) {
      answer = Refuse(Refusal::kBodyTooLarge);
      return Step::kReply;
    }
    if (const std::string_view problem = Canonicalize(req, host, down.canonical());
        !problem.empty()) {
      down.CloseAfterMalformed(ex);
      answer = RefuseWith(Refusal::kBadRequest, problem);
      return Step::kReply;
    }
    if (!ex.target.empty()) ex.target = req.target();  // the access log shows what rules saw
    route = state.routes->Match(host, req.target());
    if (route == nullptr) {
      down.RefusedWithBodyUnread(ex);
      answer = Refuse(Refusal::kNoRoute);
      return Step::kReply;
    }
    ex.route = route->name;
    ex.priority = route->priority;
    if (down.metrics() != nullptr) {
      ex.route_metric = state.route_ids[route - state.config->routes.data()];
    }
    if (down.UpgradeRefused(*route)) return Step::kReply;
    Identification who(*state.identity, req, host, route->name, down.peer_address(),
                       down.client_cert());
    const Admit admit =
        down.admission().StartRequest(state, who.facts(), who.identity(), ex, answer);
    who.StripIdentityFields();
    return Resolve(down, admit, ex);
  }

  // The check endpoint (gateway/core/check_endpoint.h) in place of route,
  // identify and admit: the request it describes goes through them.
  static Step BeginCheck(Down& down, const GatewayState& state, Exchange& ex) {
    down.SkipBody(ex);
    if (ThreadMetrics* metrics = down.metrics()) {
      metrics->RecordDecisionRequest(DecisionProtocol::kHttp);
    }
    const Admit admit = StartCheck(state, down.admission(), down.request(), down.peer_address(),
                                   down.client_cert(), down.canonical(), ex, down.answer());
    return Resolve(down, admit, ex);
  }

  // Admit's decisions with the costs the body gave, and the body the
  // upstream gets (an LLM preset may have rewritten it).
  static Step ContinueWithBody(Down& down, const GatewayState& state, Exchange& ex) {
    Admission& admission = down.admission();
    const Admit admit = admission.ContinueWithBody(state, down.BodyForCost(), ex, down.answer());
    if (std::optional<std::string> body = admission.TakeRewrittenBody()) {
      down.ReplaceBody(std::move(*body));
    }
    return Resolve(down, admit, ex);
  }

  static Step Resolve(Down& down, Admit admit, Exchange& ex) {
    switch (admit) {
      case Admit::kAdmitted:
        return Step::kForward;
      case Admit::kPending:
        return Step::kPending;
      case Admit::kNeedsBody:
        return Step::kBody;
      case Admit::kClientGone:
        return Step::kNone;
      case Admit::kRefused:
        break;
    }
    down.RefusedWithBodyUnread(ex);
    return Step::kReply;
  }

  static bool End(Down& down, const GatewayState& state, Exchange& ex) {
    down.EndExchange(ex);
    down.admission().EndExchange();
    LogExchange(state, down.metrics(), down.peer_ip(), ex);
    ex.Release();  // places of concurrency rules are given back here
    return down.KeepsConnection(ex);
  }
};

}  // namespace tollgate::gateway
