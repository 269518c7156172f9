// One HTTP/2 stream's exchange (StreamExchange): the downstream of the
// exchange driver (gateway/core/exchange_driver.h) for a stream of an
// Http2Adapter's connection, and its forward to an HTTP/1.1 upstream
// (forward_http1.cc) or an HTTP/2 one (forward_http2.cc). Internal to
// gateway/h2/. Worker thread only.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/core/admission.h"
#include "gateway/core/exchange.h"
#include "gateway/core/exchange_driver.h"
#include "gateway/core/respond.h"
#include "gateway/core/upstream_call.h"
#include "gateway/h2/adapter.h"
#include "gateway/http2/connection.h"
#include "gateway/http2/upstream_pool.h"
#include "gateway/io/relay.h"
#include "gateway/serve/worker.h"

namespace tollgate::gateway {

// gRPC's content-type: application/grpc, optionally followed by "+proto",
// ";..." and the like.
bool IsGrpc(std::string_view content_type);
// grpc-timeout: at most 8 digits and a unit (H, M, S, m, u, n); nullopt
// when malformed, which leaves the call under timeouts.request alone.
std::optional<std::int64_t> GrpcTimeoutMs(std::string_view value);
// The grpc-status field among `fields`; -1 when absent or not a number.
int GrpcStatusIn(const Fields& fields);
// How a client's request body on a stream failed: `ec` from ReadBody, or
// none when it went past max_body_bytes. Any error but the timeout is the
// stream reset or the connection gone: nobody left to answer.
BodyFailure StreamBodyFailure(const ErrorCode& ec);

// An upstream connection one of the adapter's streams holds, while it
// lives: the second and later ones of a client connection count against
// the descriptor budget (Worker::HoldExtraUpstream). `stream` is the
// holder's handle on its stream (Http2Stream::OnCancel), nulled when the
// io_context is destroyed with the holder pending: the adapter, and
// `held` with it, may be gone before the hold.
class UpstreamHold {
 public:
  UpstreamHold(Worker& worker, std::size_t& held, Http2Stream* const& stream)
      : worker_(worker), held_(held), stream_(stream), extra_(++held_ > 1) {
    if (extra_) worker_.HoldExtraUpstream();
  }
  ~UpstreamHold() {
    if (stream_ != nullptr) --held_;
    if (extra_) worker_.ReleaseExtraUpstream();
  }
  UpstreamHold(const UpstreamHold&) = delete;
  UpstreamHold& operator=(const UpstreamHold&) = delete;

 private:
  Worker& worker_;
  std::size_t& held_;
  Http2Stream* const& stream_;
  const bool extra_;
};

// One stream's request through the pipeline; lives on the heap for the
// stream's handler (its members would make every coroutine frame of the
// handler large).
class StreamExchange final : private ClientWatch {
 public:
  // What the stream is: a request to forward, or (on the decision
  // listener) a request to the check endpoint.
  enum class Kind { kForward, kCheck };

  StreamExchange(Http2Adapter& adapter, Http2Stream& stream, Kind kind)
      : kind_(kind),
        adapter_(adapter),
        stream_(stream),
        worker_(adapter.worker_),
        generation_(worker_.Current()),
        config_(*generation_->state->config),
        admission_(worker_.services()),
        gauge_(worker_.metrics(), &ThreadMetrics::AddHttp2Streams) {
    stream_.OnCancel([this] { OnCancel(); }, &tied_);
  }
  // The stream outlives the exchange until the connection hears that the
  // handler ended, which may be a turn later: no cancel may reach it.
  ~StreamExchange() { Http2Stream::Release(tied_); }
  StreamExchange(const StreamExchange&) = delete;
  StreamExchange& operator=(const StreamExchange&) = delete;


 private:
  // --- the downstream of the exchange driver (gateway/core/exchange_driver.h) ---
  friend class ExchangeDriver<StreamExchange>;
  const GatewayState& BeginExchange() const { return state(); }
  Exchange& exchange() { return ex_; }
  Answer& answer() { return answer_; }
  Admission& admission() { return admission_; }
  ClientWatch& watch() { return *this; }
  ThreadMetrics* metrics() const { return worker_.metrics(); }
  std::string& canonical() { return canonical_; }
  std::string_view peer_ip() const { return adapter_.client_.peer_ip; }
  const rules::IpAddress& peer_address() const { return adapter_.client_.peer_address; }
  const rules::ClientCertificate* client_cert() const { return adapter_.client_.client_cert.get(); }
  http::request_header<Fields>& request() { return stream_.request(); }
  // The connection has read the head before the stream's handler starts
  // (so there is no ReadHead).
  static HeadRead TakeHead(Refusal&) { return HeadRead::kRead; }
  // HTTP/2, gRPC or not, and a gRPC call's own deadline (grpc-timeout).
  void OnHead(const GatewayState& state, Exchange& ex);
  // CheckRequestHeader with the stream's :scheme; CONNECT is not offered.
  RequestHeaderCheck CheckHead();
  // The stream ends with its answer; the connection goes on.
  static void CloseAfterMalformed(Exchange&) {}
  bool IsCheckEndpoint() const { return kind_ == Kind::kCheck; }
  // By its content-length (nghttp2 has checked that DATA matches it).
  bool BodyDeclaredTooLarge();
  // The stream's unread body ends with the stream.
  static void RefusedWithBodyUnread(Exchange&) {}
  // A check request's body means nothing: not read (the peer is told to
  // stop sending it).
  void SkipBody(Exchange&) {
    if (stream_.has_body()) stream_.AbandonRequestBody();
  }
  // No upgrade: extended CONNECT is refused with CONNECT.
  static bool UpgradeRefused(const rules::RouteConfig&) { return false; }
  static bool StartReply() { return false; }
  Task<void> FinishReply() { return Reply(); }
  Task<void> WriteCheckAllowed();
  void EndExchange(Exchange& ex) {
    if (stream_.cancelled() && ex.status == 0) ex.error = "client_reset";
  }
  static bool KeepsConnection(const Exchange&) { return false; }

  // How sending the request body ended.
  enum class BodySent { kDone, kClientFailed, kUpstreamFailed };
  // How the request body pump of an HTTP/2 upstream exchange ended
  // (kBodyFailed: as body_failure_ says).
  enum class Pumped { kRunning, kDone, kBodyFailed, kUpstreamFailed };

  const GatewayState& state() const { return *generation_->state; }
  // Forward (the driver runs the upstream's admission between these): the
  // head made the upstream's, then the exchange in the upstream's protocol
  // (after a 100 Continue the client asked for). Nothing is read before the
  // upstream is asked: the body is relayed as it comes.
  bool StartForward(const rules::RouteConfig& route);
  static bool ReadsBeforeUpstream() { return false; }
  static Task<bool> ReadBeforeUpstream() { co_return true; }
  // A rule's cost comes from the body: read whole (within max_body_bytes,
  // after a 100 Continue the client asked for) into read_body_ before
  // admit decides, and forwarded from there; false when it failed
  // (answered, or the stream is gone). The body read, and the body to
  // forward in its place (an LLM preset's rewrite).
  Task<bool> ReadBodyForCost();
  std::string_view BodyForCost() const {
    return read_body_ ? std::string_view(*read_body_) : std::string_view();
  }
  void ReplaceBody(std::string body);
  // The request's content-length, for a body forwarded whole.
  void SetLength(std::size_t bytes);
  // The interim 100 Continue a request with Expect asked for.
  void SubmitContinue();
  std::string_view UpstreamTarget() { return stream_.request().target(); }
  static void RefusedBeforeUpstream(Exchange&) {}
  Task<void> ExchangeWithUpstream(const rules::RouteConfig& route,
                                  const rules::UpstreamConfig& upstream);
  // The exchange with an HTTP/1.1 upstream: the head through
  // AppendWireHeader, the body from ReadBody (chunked when the client gave
  // no length), the response back through Relay.
  Task<void> ExchangeHttp1(const rules::RouteConfig& route, const rules::UpstreamConfig& upstream);
  Task<BodySent> SendBody(UpstreamConnection& c, bool chunked, ErrorCode& upstream_ec);
  Task<void> Relay(UpstreamCall& call, const rules::UpstreamConfig& upstream);
  // The exchange with an HTTP/2 upstream (h2, h2c): a stream of the pool's,
  // the request body relayed by its own coroutine (PumpRequestBody) while
  // this one relays the response, so that both directions flow at once, as
  // a bidirectional gRPC call needs; trailers both ways.
  Task<void> ExchangeHttp2(Http2UpstreamPool& pool, const rules::UpstreamConfig& upstream);
  Task<void> PumpRequestBody(Http2UpstreamStream& up);
  // Relays the response of `up` (its head read) to the client.
  Task<void> RelayHttp2(Http2UpstreamStream& up, const rules::UpstreamConfig& upstream);
  // Stops the request body pump if it still runs and waits for its end.
  Task<void> StopPump(Http2UpstreamStream& up);
  // Writes answer_: an HTTP/2 response with tollgate's JSON body, or for a
  // gRPC call a trailers-only response whose grpc-status says it.
  Task<void> Reply();
  // Ends a gRPC call whose response has begun with answer_'s status in
  // the trailers.
  void EndGrpcCall();
  // The upstream failed: the answer when the response has not begun, else
  // the stream is reset (the only signal left).
  Task<void> FailUpstream(ConnectFailure failure, const ErrorCode& ec);
  void RecordGrpc(int grpc_status);
  // RecordGrpc with the grpc-status among `fields`, looked up only for a
  // gRPC call (a lookup in Beast's fields is a search of every field).
  void RecordGrpcIn(const Fields& fields) {
    if (grpc_) RecordGrpc(GrpcStatusIn(fields));
  }
  // ClientWatch: a reset stream ends admit's waits.
  Task<Held> Hold(Timer& timer) override;
  // The stream was reset or the connection ended: whatever waits for the
  // client or the upstream on its behalf stops.
  void OnCancel();
  // `op_ms`, or what is left of the exchange's deadline if less.
  std::chrono::milliseconds Budget(std::int64_t op_ms) const;
  // A buffer of at least `size` bytes (kept for the exchange).
  char* Buffer(std::size_t size = kRelayChunk);

  const Kind kind_;
  Http2Adapter& adapter_;
  Http2Stream& stream_;
  Http2Stream* tied_ = nullptr;  // stream_ while it lives (OnCancel)
  Worker& worker_;
  std::shared_ptr<Generation> generation_;  // a reload takes effect between streams
  const rules::Config& config_;
  Admission admission_;
  GaugeScope gauge_;  // tollgate_http2_streams
  Exchange ex_;
  Answer answer_;
  std::string canonical_;
  std::string wire_;
  std::string extra_headers_;
  std::string forwarded_lines_;  // PrepareForwardedLines' for an HTTP/1.1 upstream
  std::optional<std::string> read_body_;  // the request body, when read for its cost
  std::optional<ResponseHead> res_head_;
  std::unique_ptr<char[]> buffer_;
  std::size_t buffer_size_ = 0;
  std::unique_ptr<char[]> pump_buffer_;
  bool grpc_ = false;
  bool expects_continue_ = false;  // the request asked for 100 Continue
  bool response_started_ = false;
  Timer* hold_timer_ = nullptr;                 // admit's wait, while it runs
  UpstreamConnection* upstream_ = nullptr;      // the upstream exchange, while it runs
  Http2UpstreamStream* upstream_stream_ = nullptr;  // likewise, to an HTTP/2 upstream
  Pumped pumped_ = Pumped::kDone;
  ErrorCode pump_ec_;  // the upstream's error when pumped_ is kUpstreamFailed
  BodyFailure body_failure_ = BodyFailure::kClientGone;  // when pumped_ is kBodyFailed
  std::optional<http2_detail::Wakeup> pump_end_;
};

}  // namespace tollgate::gateway
