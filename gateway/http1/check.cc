// The HTTP/1.1 adapter of the decision service's check endpoint: Session's
// "answer" in place of "forward" on the decision listener. The phases are
// gateway/decision/check.h's (shared with the HTTP/2 adapter); what is here
// is HTTP/1.1's: the unread body, the written answer.
#include "gateway/decision/check.h"
#include "gateway/http1/session.h"

namespace tollgate::gateway {

Task<void> Session::Check(HeadParser& head, Exchange& ex) {
  const GatewayState& state = *generation_->state;
  // A check request's body means nothing; it is not read, so the
  // connection cannot carry another request after it.
  if (!head.is_done()) CloseWithBodyUnread(ex);
  if (ThreadMetrics* metrics = worker_.metrics()) {
    metrics->RecordDecisionRequest(DecisionProtocol::kHttp);
  }
  Admit admit = StartCheck(state, admission_, head.get(), peer_address_, client_cert_.get(),
                           canonical_, ex, answer_);
  if (admit == Admit::kPending) {
    const Admit finished = co_await admission_.FinishRequest(state, *this, ex, answer_);
    admit = FinishCheck(state, finished, answer_);
  }
  if (admit == Admit::kClientGone) co_return;
  if (admit == Admit::kRefused) {
    co_await Reply(ex);
    co_return;
  }
  wire_.clear();
  AppendCheckAllowed(ex.limits, ex.close ? Persistence::kClose : Persistence::kKeepAlive,
                     ex.request_id, wire_);
  ex.status = 200;
  ErrorCode ec;
  if (!TryWriteWire(stream_, ec, ex.close)) {
    ec = co_await WriteWire(stream_, Ms(config_->timeouts.client_body_ms));
  }
  if (ec) ex.close = true;
}

}  // namespace tollgate::gateway
