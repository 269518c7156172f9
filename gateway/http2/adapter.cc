#include "gateway/http2/adapter.h"

#include <spdlog/spdlog.h>

#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/write.hpp>
#include <charconv>
#include <memory>
#include <optional>

#include "gateway/core/admission.h"
#include "gateway/core/exchange.h"
#include "gateway/core/exchange_driver.h"
#include "gateway/core/forward.h"
#include "gateway/core/grpc_status.h"
#include "gateway/core/http_util.h"
#include "gateway/core/log.h"
#include "gateway/core/request_id.h"
#include "gateway/core/respond.h"
#include "gateway/core/response_filter.h"
#include "gateway/core/upstream_call.h"
#include "gateway/core/wire_header.h"
#include "gateway/decision/rls_call.h"
#include "gateway/http2/upstream_pool.h"
#include "gateway/io/read_util.h"
#include "gateway/io/relay.h"
#include "gateway/worker.h"

namespace tollgate::gateway {

Http2Options Http2OptionsFor(const rules::Config& config) {
  Http2Options options;
  options.max_concurrent_streams =
      static_cast<std::uint32_t>(config.limits.max_concurrent_streams);
  options.max_header_list_bytes = static_cast<std::uint32_t>(config.limits.max_header_bytes);
  options.idle_timeout = std::chrono::milliseconds(config.timeouts.client_idle_ms);
  options.write_timeout = std::chrono::milliseconds(config.timeouts.client_body_ms);
  return options;
}

namespace {

// gRPC's content-type is application/grpc, optionally followed by "+proto",
// ";..." and the like.
bool IsGrpc(std::string_view content_type) {
  constexpr std::string_view kGrpc = "application/grpc";
  if (content_type.size() < kGrpc.size() ||
      !beast::iequals(content_type.substr(0, kGrpc.size()), kGrpc)) {
    return false;
  }
  return content_type.size() == kGrpc.size() || content_type[kGrpc.size()] == '+' ||
         content_type[kGrpc.size()] == ';';
}

// grpc-timeout: at most 8 digits and a unit (H, M, S, m, u, n); nullopt
// when malformed, which leaves the call under timeouts.request alone.
std::optional<std::int64_t> GrpcTimeoutMs(std::string_view value) {
  if (value.size() < 2 || value.size() > 9) return std::nullopt;
  std::int64_t n = 0;
  const char* end = value.data() + value.size() - 1;
  const auto [p, ec] = std::from_chars(value.data(), end, n);
  if (ec != std::errc() || p != end || n < 0) return std::nullopt;
  switch (*end) {
    case 'H':
      return n * 3'600'000;
    case 'M':
      return n * 60'000;
    case 'S':
      return n * 1000;
    case 'm':
      return n;
    case 'u':
      return (n + 999) / 1000;
    case 'n':
      return (n + 999'999) / 1'000'000;
    default:
      return std::nullopt;
  }
}

// The grpc-status field among `fields`; -1 when absent or not a number.
int GrpcStatusIn(const Fields& fields) {
  const auto it = fields.find("grpc-status");
  if (it == fields.end()) return -1;
  int status = -1;
  const std::string_view v = it->value();
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), status);
  return ec == std::errc() && p == v.data() + v.size() ? status : -1;
}

// How a client's request body on a stream failed: `ec` from ReadBody, or
// none when it went past max_body_bytes. Any error but the timeout is the
// stream reset or the connection gone: nobody left to answer.
BodyFailure StreamBodyFailure(const ErrorCode& ec) {
  if (!ec) return BodyFailure::kTooLarge;
  return ec == beast::error::timeout ? BodyFailure::kTimeout : BodyFailure::kClientGone;
}

}  // namespace

// An upstream connection one of the adapter's streams holds, while it
// lives: the second and later ones of a client connection count against
// the descriptor budget (Worker::HoldExtraUpstream).
class UpstreamHold {
 public:
  UpstreamHold(Worker& worker, std::size_t& held)
      : worker_(worker), held_(held), extra_(++held_ > 1) {
    if (extra_) worker_.HoldExtraUpstream();
  }
  ~UpstreamHold() {
    --held_;
    if (extra_) worker_.ReleaseExtraUpstream();
  }
  UpstreamHold(const UpstreamHold&) = delete;
  UpstreamHold& operator=(const UpstreamHold&) = delete;

 private:
  Worker& worker_;
  std::size_t& held_;
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
  std::string_view peer_ip() const { return adapter_.peer_ip_; }
  const rules::IpAddress& peer_address() const { return adapter_.peer_address_; }
  const rules::ClientCertificate* client_cert() const { return adapter_.client_cert_; }
  http::request_header<Fields>& request() { return stream_.request(); }
  // The connection has read the head before the stream's handler starts.
  static HeadRead TakeHead(Refusal&) { return HeadRead::kRead; }
  static Task<HeadRead> ReadHead(Refusal&) { co_return HeadRead::kRead; }
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
  // Phase forward: what every upstream protocol shares (the forwarded
  // fields, the upstream's own limits), then the exchange in its protocol.
  Task<void> Forward(const rules::RouteConfig& route);
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
  Task<Held> Hold(std::chrono::milliseconds wait) override;
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
  std::optional<ResponseHead> res_head_;
  std::unique_ptr<char[]> buffer_;
  std::size_t buffer_size_ = 0;
  std::unique_ptr<char[]> pump_buffer_;
  bool grpc_ = false;
  bool response_started_ = false;
  Timer* hold_timer_ = nullptr;                 // admit's wait, while it runs
  UpstreamConnection* upstream_ = nullptr;      // the upstream exchange, while it runs
  Http2UpstreamStream* upstream_stream_ = nullptr;  // likewise, to an HTTP/2 upstream
  Pumped pumped_ = Pumped::kDone;
  ErrorCode pump_ec_;  // the upstream's error when pumped_ is kUpstreamFailed
  BodyFailure body_failure_ = BodyFailure::kClientGone;  // when pumped_ is kBodyFailed
  std::optional<http2_detail::Wakeup> pump_end_;
};

Http2Adapter::Http2Adapter(Worker& worker, AnyStream& stream, std::size_t listener,
                           std::string_view peer_ip, const rules::IpAddress& peer_address,
                           const rules::ClientCertificate* client_cert)
    : worker_(worker),
      listener_(listener),
      peer_ip_(peer_ip),
      peer_address_(peer_address),
      client_cert_(client_cert),
      connection_(stream, Http2OptionsFor(*worker.Current()->state->config),
                  [this](Http2Stream& s) { return Serve(s); }) {
  connection_.OnHeaderTooLarge([this](Http2Stream&) { LogHeaderTooLarge(); });
  connection_.OnStallBound([this](Http2Stream&) { WarnStallBound(); });
}

void Http2Adapter::WarnStallBound() {
  thread_local std::chrono::steady_clock::time_point last{};
  const auto now = std::chrono::steady_clock::now();
  if (last != std::chrono::steady_clock::time_point{} && now - last < std::chrono::minutes(1)) {
    return;
  }
  last = now;
  spdlog::warn(
      "HTTP/2 client {}: {} streams wait on windows it keeps closed (max_stalled_streams); "
      "its further ones are reset (ENHANCE_YOUR_CALM)",
      peer_ip_, Http2Options{}.max_stalled_streams);
}

void Http2Adapter::LogHeaderTooLarge() {
  const GatewayState& state = *worker_.Current()->state;
  Exchange ex;
  const store::Instant now = state.clock->Now();
  ex.start_ms = now.ms;
  ex.started = now.steady;
  ex.version = 20;
  NoteAnswer(Refuse(Refusal::kHeaderTooLarge), 0, ex);
  LogExchange(state, worker_.metrics(), peer_ip_, ex);
}

Task<void> Http2Adapter::Run(asio::const_buffer already_read) {
  co_await connection_.Run(already_read);
}

void Http2Adapter::Drain() {
  draining_ = true;
  connection_.Shutdown();
}

bool Http2Adapter::DrainIfIdle() {
  if (!served_ || draining_ || connection_.busy_streams() > 0) return false;
  Drain();
  return true;
}

// Not a coroutine: it hands over the one that serves the stream.
Task<void> Http2Adapter::Serve(Http2Stream& stream) {
  served_ = true;
  StreamExchange::Kind kind = StreamExchange::Kind::kForward;
  if (IsDecisionListener(*worker_.Current()->state->config, listener_)) {
    // The decision listener answers instead of forwarding: gRPC calls are
    // Envoy's RLS, anything else asks the check endpoint.
    if (IsGrpc(stream.request()[http::field::content_type])) {
      return ServeDecisionStream(worker_, stream, peer_ip_, peer_address_);
    }
    kind = StreamExchange::Kind::kCheck;
  }
  return ExchangeDriver<StreamExchange>::RunOwned(
      std::make_unique<StreamExchange>(*this, stream, kind));
}

std::chrono::milliseconds StreamExchange::Budget(std::int64_t op_ms) const {
  const std::int64_t left = ex_.deadline_ms - state().clock->NowMs();
  return Ms(std::max<std::int64_t>(1, std::min(op_ms, left)));
}

char* StreamExchange::Buffer(std::size_t size) {
  if (buffer_size_ < size) {
    buffer_ = std::make_unique_for_overwrite<char[]>(size);
    buffer_size_ = size;
  }
  return buffer_.get();
}

void StreamExchange::OnCancel() {
  if (hold_timer_ != nullptr) hold_timer_->cancel();
  if (upstream_ != nullptr) Lowest(upstream_->stream).cancel();
  if (upstream_stream_ != nullptr) upstream_stream_->Reset();
}

Task<ClientWatch::Held> StreamExchange::Hold(std::chrono::milliseconds wait) {
  if (stream_.cancelled()) co_return Held::kClientGone;
  const Executor executor = co_await asio::this_coro::executor;
  Timer timer(executor, wait);
  hold_timer_ = &timer;
  co_await timer.async_wait(kUseTuple);
  hold_timer_ = nullptr;
  co_return stream_.cancelled() ? Held::kClientGone : Held::kElapsed;
}

void StreamExchange::RecordGrpc(int grpc_status) {
  if (!grpc_ || ex_.route_metric < 0) return;
  if (ThreadMetrics* metrics = worker_.metrics()) {
    metrics->RecordGrpcResponse(ex_.route_metric, grpc_status);
  }
}

void StreamExchange::OnHead(const GatewayState& state, Exchange& ex) {
  ex.version = 20;
  auto& req = stream_.request();
  grpc_ = IsGrpc(req[http::field::content_type]);
  if (!grpc_) return;
  if (const auto it = req.find("grpc-timeout"); it != req.end()) {
    if (const auto ms = GrpcTimeoutMs(it->value())) {
      ex.deadline_ms = std::min(ex.deadline_ms, ex.start_ms + *ms);
    }
  }
}

RequestHeaderCheck StreamExchange::CheckHead() {
  auto& req = stream_.request();
  if (req.method() == http::verb::connect) {
    RequestHeaderCheck check;
    check.problem = "CONNECT is not supported";
    check.status = http::status::not_implemented;
    return check;
  }
  // The one check of a request's head, as for HTTP/1.1.
  return CheckRequestHeader(req, false, stream_.scheme());
}

bool StreamExchange::BodyDeclaredTooLarge() {
  auto& req = stream_.request();
  const auto length = req.find(http::field::content_length);
  if (length == req.end()) return false;
  std::uint64_t declared = 0;
  std::from_chars(length->value().data(), length->value().data() + length->value().size(),
                  declared);
  return declared > static_cast<std::uint64_t>(config_.limits.max_body_bytes);
}

Task<void> StreamExchange::WriteCheckAllowed() {
  http::response_header<Fields> head;
  head.result(http::status::ok);
  head.set(http::field::server, "tollgate");
  head.set(http::field::content_length, "0");
  extra_headers_.clear();
  AppendCheckAllowedFields(ex_.limits, ex_.request_id, extra_headers_);
  AddHeaderLines(extra_headers_, head);
  if (stream_.SubmitResponse(head, Http2Body::kNone)) co_return;
  response_started_ = true;
  ex_.status = 200;
}

Task<void> StreamExchange::Reply() {
  http::response_header<Fields> head;
  head.set(http::field::server, "tollgate");
  extra_headers_.clear();
  answer_.request_id = ex_.request_id;
  AppendRequestIdLine(answer_.request_id, extra_headers_);
  if (answer_.refusal == Refusal::kRateLimited && answer_.rule != nullptr) {
    AppendRateLimitHeaders(*answer_.rule, answer_.decision, extra_headers_);
  }
  const std::int64_t retry_after = RetryAfterSeconds(answer_);
  if (retry_after > 0) head.set(http::field::retry_after, std::to_string(retry_after));
  AddHeaderLines(extra_headers_, head);
  wire_.clear();
  if (grpc_) {
    // Trailers-only (gRPC over HTTP/2): the status in the only header.
    const GrpcStatus status = InfoOf(answer_.refusal).grpc;
    AppendGrpcMessage(answer_, wire_);
    SetGrpcTrailersOnly(head, static_cast<int>(status), wire_);
    if (stream_.SubmitResponse(head, Http2Body::kNone)) co_return;
    response_started_ = true;
    NoteAnswer(answer_, 0, ex_);
    ex_.status = 200;  // what the client got; the error word says why
    RecordGrpc(static_cast<int>(status));
    co_return;
  }
  const std::size_t body = AppendAnswerBody(answer_, wire_);
  head.result(answer_.Status());
  head.set(http::field::content_type, "application/json");
  head.set(http::field::content_length, std::to_string(body));
  if (stream_.SubmitResponse(head, Http2Body::kFollows)) co_return;
  response_started_ = true;
  NoteAnswer(answer_, body, ex_);
  const ErrorCode ec = co_await stream_.WriteBody(asio::buffer(wire_), BodyEnd::kLast,
                                                  Budget(config_.timeouts.client_body_ms));
  // A client that never opens its window gets a reset at client_body.
  if (ec == beast::error::timeout) stream_.Reset(Http2ErrorCode::kCancel);
}

void StreamExchange::EndGrpcCall() {
  const GrpcStatus status = InfoOf(answer_.refusal).grpc;
  Fields trailers;
  trailers.set("grpc-status", std::to_string(static_cast<int>(status)));
  wire_.clear();
  AppendGrpcMessage(answer_, wire_);
  trailers.set("grpc-message", wire_);
  if (stream_.SubmitTrailers(trailers)) return;
  ex_.error = InfoOf(answer_.refusal).code;
  RecordGrpc(static_cast<int>(status));
}

Task<void> StreamExchange::Forward(const rules::RouteConfig& route) {
  auto& req = stream_.request();
  const bool expects_continue =
      stream_.has_body() && beast::iequals(req[http::field::expect], "100-continue");
  const Scheme scheme =
      state().listener_tls[adapter_.listener_] ? Scheme::kHttps : Scheme::kHttp;
  Http2UpstreamPool* http2_pool = generation_->http2_pools[route.upstream_index].get();
  // An HTTP/1.1 upstream gets the header only as AppendWireHeader's text.
  PrepareForwardedHead(config_, req, adapter_.peer_ip_, scheme, ClientProtocol::kHttp2,
                       http2_pool != nullptr ? nullptr : &forwarded_lines_);

  const rules::UpstreamConfig& upstream = config_.upstreams[route.upstream_index];
  if (AdmitsUpstream(upstream)) {
    const Admit admit = co_await admission_.AdmitUpstream(state(), upstream, route.name,
                                                          UpstreamPath(req.target()), ex_, answer_);
    if (admit != Admit::kAdmitted) {
      co_await Reply();
      co_return;
    }
  }
  if (expects_continue) {
    http::response_header<Fields> interim;
    interim.result(http::status::continue_);
    stream_.SubmitResponse(interim, Http2Body::kNone);
  }

  MarkUpstreamStart(state(), route.upstream_index, worker_.metrics() != nullptr, ex_);
  if (http2_pool != nullptr) {
    co_await ExchangeHttp2(*http2_pool, upstream);
  } else {
    co_await ExchangeHttp1(route, upstream);
  }
}

Task<void> StreamExchange::ExchangeHttp1(const rules::RouteConfig& route,
                                         const rules::UpstreamConfig& upstream) {
  auto& req = stream_.request();
  const bool has_body = stream_.has_body();
  UpstreamCall call(*generation_->pools[route.upstream_index]);
  call.upstream_metric = ex_.upstream_metric;
  call.head_request = req.method() == http::verb::head;
  // A body read from the stream cannot be sent twice.
  call.replayable = IsIdempotent(req.method()) && !has_body;
  const bool chunked = has_body && req.find(http::field::content_length) == req.end();
  req.version(11);
  if (chunked) req.set(http::field::transfer_encoding, "chunked");
  const rules::TimeoutsConfig& timeouts = config_.timeouts;
  std::optional<UpstreamHold> hold;  // while call.conn is this stream's
  for (Attempt attempt = Attempt::kFirst;; attempt = Attempt::kRetry) {
    hold.reset();
    ConnectResult cr = TakePooled(call, attempt);
    if (!cr.connection) {
      cr = co_await ConnectUpstream(call, attempt, timeouts.upstream_connect_ms);
    }
    ex_.upstream = cr.server;
    if (!cr.connection) {
      co_await FailUpstream(cr.failure, {});
      co_return;
    }
    call.conn = std::move(cr.connection);
    if (stream_.cancelled()) co_return;
    hold.emplace(worker_, adapter_.upstreams_held_);
    upstream_ = call.conn.get();
    wire_.clear();
    AppendWireHeader(req, wire_, forwarded_lines_);
    UpstreamConnection& c = *call.conn;
    // Written through Asio (its completion posted), not tried at once as
    // the HTTP/1.1 adapter does: measured with bench/http2.sh, the shorter
    // path had more upstream requests in flight at once, so more connects
    // past max_idle, and fewer requests per second (see bench/RESULTS.md).
    Lowest(c.stream).expires_after(Budget(timeouts.upstream_response_ms));
    auto [ec, n] = co_await Visit(
        c.stream, [&](auto& s) { return asio::async_write(s, asio::buffer(wire_), kUseTuple); });
    if (!ec && has_body) {
      const BodySent sent = co_await SendBody(c, chunked, ec);
      if (sent == BodySent::kClientFailed) {
        upstream_ = nullptr;
        co_return;
      }
    }
    std::size_t received = 0;
    if (!ec) {
      std::tie(ec, received) =
          co_await ReadResponseHead(call, res_head_, Budget(timeouts.upstream_response_ms));
    }
    if (!ec) break;
    upstream_ = nullptr;
    if (stream_.cancelled()) co_return;
    if (RetryOnFresh(call, attempt, received, ec)) continue;
    co_await FailUpstream(ConnectFailure::kNone, ec);
    co_return;
  }
  co_await Relay(call, upstream);
  upstream_ = nullptr;
}

Task<StreamExchange::BodySent> StreamExchange::SendBody(UpstreamConnection& c, bool chunked,
                                                        ErrorCode& upstream_ec) {
  const rules::TimeoutsConfig& timeouts = config_.timeouts;
  char* buffer = Buffer();
  const auto limit = static_cast<std::uint64_t>(config_.limits.max_body_bytes);
  for (;;) {
    const Http2Read r =
        co_await stream_.ReadBody(asio::buffer(buffer, kRelayChunk), Budget(timeouts.client_body_ms));
    if (!r.ec) ex_.bytes_in += r.bytes;
    if (r.ec || ex_.bytes_in > limit) {
      if (RefuseBody(StreamBodyFailure(r.ec), answer_)) co_await Reply();
      co_return BodySent::kClientFailed;
    }
    // Chunked framing around the piece, which is not copied; the last
    // chunk carries the request's trailers.
    std::string size_line;
    wire_.clear();
    if (chunked) {
      if (r.bytes > 0) {
        AppendChunkSizeLine(r.bytes, size_line);
        wire_ = "\r\n";
      }
      if (r.end) AppendLastChunk(ForwardableRequestTrailers(stream_.trailers(), config_.identity), wire_);
    }
    if (size_line.empty() && r.bytes == 0 && wire_.empty()) {
      if (r.end) co_return BodySent::kDone;
      continue;
    }
    const std::array<asio::const_buffer, 3> pieces{
        asio::buffer(size_line), asio::buffer(buffer, r.bytes), asio::buffer(wire_)};
    Lowest(c.stream).expires_after(Budget(timeouts.upstream_response_ms));
    auto [ec, n] = co_await Visit(
        c.stream, [&](auto& s) { return asio::async_write(s, pieces, kUseTuple); });
    if (ec) {
      upstream_ec = ec;
      co_return BodySent::kUpstreamFailed;
    }
    if (r.end) co_return BodySent::kDone;
  }
}

Task<void> StreamExchange::FailUpstream(ConnectFailure failure, const ErrorCode& ec) {
  const Refusal refusal = UpstreamFailed(ex_.upstream_metric, failure, ec, worker_.metrics());
  if (response_started_) {
    stream_.Reset(Http2ErrorCode::kInternalError);
    ex_.error = "upstream_body";
    co_return;
  }
  answer_ = Refuse(refusal);
  co_await Reply();
}

Task<void> StreamExchange::Relay(UpstreamCall& call, const rules::UpstreamConfig& upstream) {
  const rules::TimeoutsConfig& timeouts = config_.timeouts;
  const store::Clock& clock = *state().clock;
  auto& res = res_head_->get();
  // (The parser's flags: the framing fields go with the hop-by-hop ones.)
  const bool reusable = res_head_->keep_alive();
  const bool no_body = res_head_->is_done();
  ResponseFilter filter(ex_);
  filter.Head(state(), &admission_, upstream, UpstreamProtocol::kHttp1, res, extra_headers_);
  AddHeaderLines(extra_headers_, res);
  if (no_body) {
    MarkUpstreamEnd(clock, ex_);
    filter.End();
    if (!stream_.SubmitResponse(res, Http2Body::kNone)) {
      response_started_ = true;
      RecordGrpcIn(res);
    }
    upstream_ = nullptr;
    if (reusable) call.pool.Release(std::move(call.conn));
    co_return;
  }
  if (stream_.SubmitResponse(res, Http2Body::kFollows)) co_return;
  response_started_ = true;
  const int header_status = grpc_ ? GrpcStatusIn(res) : -1;
  // The fields after the header's own are the chunked body's trailers.
  std::size_t header_fields = 0;
  for (auto it = res.begin(); it != res.end(); ++it) ++header_fields;

  ResponseParser<http::buffer_body> body{std::move(*res_head_)};
  body.body_limit(boost::none);
  auto& piece = body.get().body();
  // A body of known length below kRelayChunk (most are) gets a buffer of
  // its size: a 16 KB one for every response cost the allocator about a
  // thousand instructions.
  const auto remaining = body.content_length_remaining();
  const std::size_t chunk = remaining && *remaining < kRelayChunk
                                ? std::max<std::size_t>(static_cast<std::size_t>(*remaining), 1)
                                : kRelayChunk;
  char* buffer = Buffer(chunk);
  UpstreamConnection& c = *call.conn;
  for (;;) {
    piece.data = buffer;
    piece.size = chunk;
    // Read through Beast even when the body came with the header (parsing
    // it here instead was measured slower: see the upstream write above).
    Lowest(c.stream).expires_after(Budget(timeouts.upstream_response_ms));
    auto [ec, n] = co_await Visit(
        c.stream, [&](auto& s) { return http::async_read_some(s, c.buffer, body, kUseTuple); });
    if (ec == http::error::need_buffer) ec = {};
    if (ec) {
      if (!stream_.cancelled()) {
        co_await FailUpstream(ConnectFailure::kNone, ec);
      }
      co_return;
    }
    const std::size_t got = chunk - piece.size;
    const bool done = body.is_done();
    Fields trailers;
    if (done) {
      MarkUpstreamEnd(clock, ex_);
      std::size_t i = 0;
      for (const auto& field : body.get()) {
        if (i++ >= header_fields) trailers.insert(field.name_string(), field.value());
      }
    }
    const bool has_trailers = trailers.begin() != trailers.end();
    ex_.bytes_out += got;
    filter.Body(buffer, got);
    if (done) filter.End();
    if (got > 0 || (done && !has_trailers)) {
      const ErrorCode wec = co_await stream_.WriteBody(
          asio::buffer(buffer, got), done && !has_trailers ? BodyEnd::kLast : BodyEnd::kMore,
          Budget(timeouts.client_body_ms));
      if (wec) {
        // A client that never opens its window gets a reset at client_body.
        if (wec == beast::error::timeout) stream_.Reset(Http2ErrorCode::kCancel);
        co_return;
      }
    }
    if (!done) continue;
    if (has_trailers && stream_.SubmitTrailers(trailers)) co_return;
    if (has_trailers) {
      RecordGrpcIn(trailers);
    } else {
      RecordGrpc(header_status);
    }
    upstream_ = nullptr;
    if (reusable) call.pool.Release(std::move(call.conn));
    co_return;
  }
}

Task<void> StreamExchange::ExchangeHttp2(Http2UpstreamPool& pool,
                                         const rules::UpstreamConfig& upstream) {
  const bool has_body = stream_.has_body();
  Http2OpenResult open =
      co_await pool.Open(stream_.request(), has_body ? Http2Body::kFollows : Http2Body::kNone,
                         Budget(config_.timeouts.upstream_connect_ms));
  ex_.upstream = open.server;
  if (!open.stream) {
    co_await FailUpstream(open.failure, {});
    co_return;
  }
  Http2UpstreamStream up = std::move(open.stream);
  if (stream_.cancelled()) co_return;  // `up` is reset as it goes
  upstream_stream_ = &up;
  if (has_body) {
    const Executor executor = co_await asio::this_coro::executor;
    pumped_ = Pumped::kRunning;
    pump_end_.emplace(executor);
    asio::co_spawn(executor, PumpRequestBody(up), asio::detached);
  }
  ErrorCode ec;
  {
    ec = co_await up.ReadResponseHead(Budget(config_.timeouts.upstream_response_ms));
  }
  if (ec) {
    co_await StopPump(up);
    upstream_stream_ = nullptr;
    if (stream_.cancelled()) co_return;
    if (pumped_ == Pumped::kBodyFailed) {
      if (RefuseBody(body_failure_, answer_)) co_await Reply();
    } else {
      co_await FailUpstream(ConnectFailure::kNone,
                            pumped_ == Pumped::kUpstreamFailed ? pump_ec_ : ec);
    }
    co_return;
  }
  co_await RelayHttp2(up, upstream);
  co_await StopPump(up);
  upstream_stream_ = nullptr;
}

Task<void> StreamExchange::PumpRequestBody(Http2UpstreamStream& up) {
  const rules::TimeoutsConfig& timeouts = config_.timeouts;
  if (!pump_buffer_) pump_buffer_ = std::make_unique_for_overwrite<char[]>(kRelayChunk);
  char* buffer = pump_buffer_.get();
  const auto limit = static_cast<std::uint64_t>(config_.limits.max_body_bytes);
  Pumped end = Pumped::kDone;
  for (;;) {
    const Http2Read r = co_await stream_.ReadBody(asio::buffer(buffer, kRelayChunk),
                                                  Budget(timeouts.client_body_ms));
    if (!r.ec) ex_.bytes_in += r.bytes;
    if (r.ec || ex_.bytes_in > limit) {
      end = Pumped::kBodyFailed;
      body_failure_ = StreamBodyFailure(r.ec);
      break;
    }
    Fields trailers;
    if (r.end) trailers = ForwardableRequestTrailers(stream_.trailers(), config_.identity);
    const bool has_trailers = trailers.begin() != trailers.end();
    ErrorCode ec;
    if (r.bytes > 0 || (r.end && !has_trailers)) {
      ec = co_await up.WriteBody(asio::buffer(buffer, r.bytes),
                                 r.end && !has_trailers ? BodyEnd::kLast : BodyEnd::kMore,
                                 Budget(timeouts.upstream_response_ms));
    }
    if (!ec && has_trailers) ec = up.EndBody(trailers);
    if (ec) {
      // The response side sees the upstream's failure for itself, and an
      // early answer (a 413, say) that came with it stays readable.
      pump_ec_ = ec;
      pumped_ = Pumped::kUpstreamFailed;
      pump_end_->Notify();
      co_return;
    }
    if (r.end) break;
  }
  // The client failed: the upstream stream ends too, which ends the
  // response side's wait.
  if (end != Pumped::kDone) up.Reset();
  pumped_ = end;
  pump_end_->Notify();
}

Task<void> StreamExchange::StopPump(Http2UpstreamStream& up) {
  if (pumped_ != Pumped::kRunning) co_return;
  // The exchange is over: the pump's failure from here on is this stop.
  stream_.AbandonRequestBody();
  up.Reset();
  while (pumped_ == Pumped::kRunning) {
    co_await pump_end_->Wait(std::chrono::steady_clock::time_point::max());
  }
  pumped_ = Pumped::kDone;
}

Task<void> StreamExchange::RelayHttp2(Http2UpstreamStream& up,
                                      const rules::UpstreamConfig& upstream) {
  const rules::TimeoutsConfig& timeouts = config_.timeouts;
  const store::Clock& clock = *state().clock;
  auto& res = up.response();
  ResponseFilter filter(ex_);
  filter.Head(state(), &admission_, upstream, UpstreamProtocol::kHttp2, res, extra_headers_);
  AddHeaderLines(extra_headers_, res);
  const auto mark_end = [&] {
    MarkUpstreamEnd(clock, ex_);
    filter.End();
  };
  if (!up.response_has_body()) {
    mark_end();
    if (!stream_.SubmitResponse(res, Http2Body::kNone)) {
      response_started_ = true;
      RecordGrpcIn(res);
    }
    co_return;
  }
  if (stream_.SubmitResponse(res, Http2Body::kFollows)) co_return;
  response_started_ = true;
  const int header_status = grpc_ ? GrpcStatusIn(res) : -1;
  char* buffer = Buffer();
  for (;;) {
    const Http2Read r = co_await up.ReadBody(asio::buffer(buffer, kRelayChunk),
                                             Budget(timeouts.upstream_response_ms));
    if (r.ec) {
      if (stream_.cancelled()) co_return;
      if (pumped_ == Pumped::kRunning || pumped_ == Pumped::kDone ||
          pumped_ == Pumped::kUpstreamFailed) {
        co_await FailUpstream(ConnectFailure::kNone, r.ec);
      } else if (pumped_ == Pumped::kBodyFailed && body_failure_ == BodyFailure::kTooLarge &&
                 grpc_) {
        // A call cut at max_body_bytes ends as a trailers-only answer
        // would (RESOURCE_EXHAUSTED), not as a reset (CANCELLED).
        answer_ = Refuse(Refusal::kBodyTooLarge);
        EndGrpcCall();
      } else {
        // The client's request body failed while the response was flowing.
        stream_.Reset(Http2ErrorCode::kCancel);
      }
      co_return;
    }
    ex_.bytes_out += r.bytes;
    filter.Body(buffer, r.bytes);
    const Fields& trailers = up.trailers();
    const bool has_trailers = r.end && trailers.begin() != trailers.end();
    if (r.bytes > 0 || (r.end && !has_trailers)) {
      const ErrorCode wec = co_await stream_.WriteBody(
          asio::buffer(buffer, r.bytes), r.end && !has_trailers ? BodyEnd::kLast : BodyEnd::kMore,
          Budget(timeouts.client_body_ms));
      if (wec) {
        // A client that never opens its window gets a reset at client_body.
        if (wec == beast::error::timeout) stream_.Reset(Http2ErrorCode::kCancel);
        co_return;
      }
    }
    if (!r.end) continue;
    mark_end();
    if (has_trailers && stream_.SubmitTrailers(trailers)) co_return;
    if (has_trailers) {
      RecordGrpcIn(trailers);
    } else {
      RecordGrpc(header_status);
    }
    co_return;
  }
}

}  // namespace tollgate::gateway
