// The HTTP/1.1 adapter of the decision service's check endpoint: Session's
// "answer" in place of "forward" on the decision listener.
#include "gateway/core/identify.h"
#include "gateway/decision/check.h"
#include "gateway/http1/session.h"

namespace tollgate::gateway {

Task<void> Session::Check(HeadParser& head, Exchange& ex) {
  const GatewayState& state = *generation_->state;
  // A check request's body means nothing; it is not read, so the
  // connection cannot carry another request after it.
  if (!head.is_done()) ex.close = true;
  if (ThreadMetrics* metrics = worker_.metrics()) {
    metrics->RecordDecisionRequest(DecisionProtocol::kHttp);
  }
  auto& req = head.get();
  if (!IsCheckTarget(req.target())) {
    answer_ = Refuse(Refusal::kNoRoute);
    co_await Reply(ex);
    co_return;
  }
  if (const std::string_view problem = DescribeOriginal(req); !problem.empty()) {
    answer_ = RefuseWith(Refusal::kBadRequest, problem);
    co_await Reply(ex);
    co_return;
  }
  std::string_view host = req[http::field::host];
  if (const std::string_view problem = Canonicalize(req, host, canonical_); !problem.empty()) {
    answer_ = RefuseWith(Refusal::kBadRequest, problem);
    co_await Reply(ex);
    co_return;
  }
  if (!ex.method.empty()) {
    // The access log shows the request decided on.
    ex.method = req.method_string();
    ex.target = req.target();
  }
  const unsigned deny_status = config_->decision->deny_status;
  const rules::RouteConfig* route = state.routes->Match(host, req.target());
  if (route == nullptr) {
    answer_ = Refuse(Refusal::kNoRoute);
    ApplyDenyStatus(deny_status, answer_);
    co_await Reply(ex);
    co_return;
  }
  ex.route = route->name;
  if (worker_.metrics() != nullptr) {
    ex.route_metric = state.route_ids[route - config_->routes.data()];
  }
  Admit admit = Identify(*route, host, ex);
  if (admit == Admit::kPending) {
    admit = co_await admission_.FinishRequest(state, *this, ex, answer_);
  }
  if (admit == Admit::kClientGone) co_return;
  if (admit == Admit::kRefused) {
    ApplyDenyStatus(deny_status, answer_);
    co_await Reply(ex);
    co_return;
  }
  wire_.clear();
  AppendCheckAllowed(ex.limits, ex.close ? Persistence::kClose : Persistence::kKeepAlive, wire_);
  ex.status = 200;
  ErrorCode ec;
  if (!TryWriteWire(stream_, ec)) ec = co_await WriteWire(stream_, Ms(config_->timeouts.client_body_ms));
  if (ec) ex.close = true;
}

}  // namespace tollgate::gateway
