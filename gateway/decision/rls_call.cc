#include "gateway/decision/rls_call.h"

#include <memory>
#include <vector>

#include "gateway/core/admission.h"
#include "gateway/core/exchange.h"
#include "gateway/core/grpc_status.h"
#include "gateway/core/identify.h"
#include "gateway/core/log.h"
#include "gateway/core/respond.h"
#include "gateway/decision/rls.h"
#include "gateway/serve/stream_hold.h"
#include "gateway/http2/connection.h"
#include "gateway/serve/worker.h"

namespace tollgate::gateway {
namespace {

// The most a ShouldRateLimit request may hold: Envoy's are a few hundred
// bytes; [limits] max_body_bytes bounds it further.
constexpr std::size_t kMaxRlsMessage = 64 * 1024;

// One call; on the heap for the stream's handler.
class RlsCall final : private ClientWatch {
 public:
  RlsCall(Worker& worker, Http2Stream& stream, std::string_view peer_ip,
          const rules::IpAddress& peer)
      : worker_(worker),
        stream_(stream),
        peer_ip_(peer_ip),
        peer_(peer),
        generation_(worker.Current()),
        admission_(worker.services()) {
    stream_.OnCancel(
        [this] {
          if (hold_timer_ != nullptr) hold_timer_->cancel();
        },
        &tied_);
  }
  // The stream outlives the call until the connection hears that the
  // handler ended, which may be a turn later: no cancel may reach it.
  ~RlsCall() { Http2Stream::Release(tied_); }
  RlsCall(const RlsCall&) = delete;
  RlsCall& operator=(const RlsCall&) = delete;

  Task<void> Run();

 private:
  const GatewayState& state() const { return *generation_->state; }
  // The request body, whole; false when the call ended (answered or gone).
  Task<bool> ReadRequest();
  // Decides every descriptor into verdicts_; false when the call ended
  // otherwise (store unavailable under on_error = "deny": answered; the
  // client left).
  Task<bool> Decide();
  // Ends the call with `status` and `message` (trailers-only).
  void Fail(GrpcStatus status, std::string_view message);
  Task<void> Respond();
  Task<Held> Hold(Timer& timer) override;

  Worker& worker_;
  Http2Stream& stream_;
  Http2Stream* tied_ = nullptr;  // stream_ while it lives (OnCancel)
  std::string_view peer_ip_;
  const rules::IpAddress& peer_;
  std::shared_ptr<Generation> generation_;  // a reload takes effect between calls
  Admission admission_;
  Exchange ex_;
  Answer answer_;
  std::string body_;
  std::string wire_;
  rls::RateLimitRequest request_;
  std::vector<DescriptorVerdict> verdicts_;
  Timer* hold_timer_ = nullptr;
};

Task<ClientWatch::Held> RlsCall::Hold(Timer& timer) {
  return HoldStream(stream_, hold_timer_, timer);
}

void RlsCall::Fail(GrpcStatus status, std::string_view message) {
  http::response_header<Fields> head;
  head.set(http::field::server, "tollgate");
  std::string encoded;
  AppendGrpcPercentEncoded(message, encoded);
  SetGrpcTrailersOnly(head, static_cast<int>(status), encoded);
  stream_.SubmitResponse(head, Http2Body::kNone);
  ex_.status = 200;
  if (status != GrpcStatus::kOk && ex_.error.empty()) {
    ex_.error = status == GrpcStatus::kInvalidArgument ? "bad_request"
                : status == GrpcStatus::kUnavailable   ? "store_unavailable"
                                                       : "not_implemented";
  }
}

Task<bool> RlsCall::ReadRequest() {
  const rules::Config& config = *state().config;
  const std::size_t limit = std::min<std::size_t>(
      kMaxRlsMessage, static_cast<std::size_t>(config.limits.max_body_bytes) + 5);
  char buffer[4096];
  for (;;) {
    const Http2Read r = co_await stream_.ReadBody(
        asio::buffer(buffer), std::chrono::milliseconds(config.timeouts.client_body_ms));
    if (r.ec) {
      if (r.ec == beast::error::timeout) {
        Fail(GrpcStatus::kDeadlineExceeded, "request message not received in time");
      }
      co_return false;
    }
    body_.append(buffer, r.bytes);
    ex_.bytes_in += r.bytes;
    if (body_.size() > limit) {
      stream_.AbandonRequestBody();
      Fail(GrpcStatus::kResourceExhausted, "the request message is too large");
      co_return false;
    }
    if (r.end) co_return true;
  }
}

Task<bool> RlsCall::Decide() {
  const GatewayState& s = state();
  FieldsLookup headers(stream_.request());
  std::vector<rules::DescriptorEntry> entries;
  for (const auto& descriptor : request_.descriptors()) {
    entries.clear();
    for (const auto& entry : descriptor.entries()) entries.push_back({entry.key(), entry.value()});
    rules::RequestFacts facts;
    facts.peer = peer_;
    facts.headers = &headers;
    facts.descriptor_call = true;
    facts.domain = request_.domain();
    facts.descriptor = entries;
    facts.cost = DescriptorCost(request_, descriptor);
    rules::DescriptorLimit limit;
    if (DescriptorLimitOf(descriptor, limit)) facts.descriptor_limit = &limit;
    const rules::Identity identity = s.identity->Resolve(facts);
    Exchange ex;
    Admit admit = admission_.StartRequest(s, facts, identity, ex, answer_, BodyCost::kDefault);
    if (admit == Admit::kPending) {
      admit = co_await admission_.FinishRequest(s, *this, ex, answer_);
    }
    if (!ex.ratelimit.empty()) {
      if (!ex_.ratelimit.empty()) ex_.ratelimit += ',';
      ex_.ratelimit += ex.ratelimit;
    }
    if (admit == Admit::kClientGone) co_return false;
    DescriptorVerdict& verdict = verdicts_.emplace_back();
    if (admit == Admit::kRefused) {
      if (answer_.refusal == Refusal::kStoreUnavailable) {
        // on_error = "deny": Envoy's failure_mode_deny decides then.
        Fail(GrpcStatus::kUnavailable, "the rate-limit store is unavailable");
        co_return false;
      }
      verdict.over_limit = true;
      verdict.rule = answer_.rule;
      verdict.decision = answer_.decision;
      verdict.refusal = answer_;
      if (answer_.refusal == Refusal::kRateLimited && ex_.retry_after_ms < 0) {
        ex_.retry_after_ms = answer_.decision.retry_after_ms;
      }
    } else {
      verdict.rule = ex.limits.shown;
      verdict.decision = ex.limits.shown_decision;
    }
    ex.Release();
  }
  co_return true;
}

Task<void> RlsCall::Respond() {
  rls::RateLimitResponse response;
  BuildRateLimitResponse(verdicts_, response);
  wire_.clear();
  AppendGrpcFrame(response, wire_);
  http::response_header<Fields> head;
  head.result(http::status::ok);
  head.set(http::field::server, "tollgate");
  head.set(http::field::content_type, "application/grpc");
  if (stream_.SubmitResponse(head, Http2Body::kFollows)) co_return;
  ex_.status = 200;
  ex_.bytes_out = wire_.size();
  const ErrorCode ec =
      co_await stream_.WriteBody(asio::buffer(wire_), BodyEnd::kMore,
                                 std::chrono::milliseconds(state().config->timeouts.client_body_ms));
  if (ec) {
    if (ec == beast::error::timeout) stream_.Reset(Http2ErrorCode::kCancel);
    co_return;
  }
  Fields trailers;
  trailers.set("grpc-status", "0");
  stream_.SubmitTrailers(trailers);
}

Task<void> RlsCall::Run() {
  const store::Instant start = state().clock->Now();
  ex_.start_ms = start.ms;
  ex_.started = start.steady;
  ex_.version = 20;
  ex_.deadline_ms = ex_.start_ms + state().config->timeouts.request_ms;
  auto& req = stream_.request();
  if (const AccessLog* log = state().access_log; log != nullptr && log->enabled()) {
    ex_.method = req.method_string();
    ex_.target = req.target();
    ex_.user_agent = req[http::field::user_agent];
  }
  if (req.method() != http::verb::post || req.target() != kShouldRateLimitPath) {
    stream_.AbandonRequestBody();
    Fail(GrpcStatus::kUnimplemented, "the decision listener serves " +
                                         std::string(kShouldRateLimitPath) + " only");
  } else {
    if (ThreadMetrics* metrics = worker_.metrics()) {
      metrics->RecordDecisionRequest(DecisionProtocol::kRls);
    }
    const bool read = co_await ReadRequest();
    if (read) {
      if (const std::string problem = ParseRateLimitRequest(body_, request_); !problem.empty()) {
        Fail(GrpcStatus::kInvalidArgument, problem);
      } else {
        const bool decided = co_await Decide();
        if (decided) co_await Respond();
      }
    }
  }
  if (stream_.cancelled() && ex_.status == 0) ex_.error = "client_reset";
  LogExchange(state(), worker_.metrics(), peer_ip_, ex_);
}

}  // namespace

Task<void> ServeDecisionStream(Worker& worker, Http2Stream& stream, std::string_view peer_ip,
                               const rules::IpAddress& peer) {
  auto call = std::make_unique<RlsCall>(worker, stream, peer_ip, peer);
  co_await call->Run();
}

}  // namespace tollgate::gateway
