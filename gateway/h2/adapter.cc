#include "gateway/h2/adapter.h"

#include <spdlog/spdlog.h>

#include <charconv>
#include <memory>
#include <string>
#include <utility>

#include "gateway/core/check_endpoint.h"
#include "gateway/core/grpc_status.h"
#include "gateway/core/http_util.h"
#include "gateway/core/log.h"
#include "gateway/core/request_id.h"
#include "gateway/decision/rls_call.h"
#include "gateway/h2/stream_exchange.h"
#include "gateway/serve/stream_hold.h"
#include "gateway/io/tls.h"
#include "gateway/io/wire_header.h"

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


bool IsGrpc(std::string_view content_type) {
  constexpr std::string_view kGrpc = "application/grpc";
  if (content_type.size() < kGrpc.size() ||
      !beast::iequals(content_type.substr(0, kGrpc.size()), kGrpc)) {
    return false;
  }
  return content_type.size() == kGrpc.size() || content_type[kGrpc.size()] == '+' ||
         content_type[kGrpc.size()] == ';';
}

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

int GrpcStatusIn(const Fields& fields) {
  const auto it = fields.find("grpc-status");
  if (it == fields.end()) return -1;
  int status = -1;
  const std::string_view v = it->value();
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), status);
  return ec == std::errc() && p == v.data() + v.size() ? status : -1;
}

BodyFailure StreamBodyFailure(const ErrorCode& ec) {
  if (!ec) return BodyFailure::kTooLarge;
  return ec == beast::error::timeout ? BodyFailure::kTimeout : BodyFailure::kClientGone;
}

Task<void> Http2Adapter::Serve(Worker& worker, AcceptedClient client, std::string preface) {
  auto adapter = std::make_unique<Http2Adapter>(worker, std::move(client));
  Http2Adapter& self = *adapter;
  return self.Run(std::move(adapter), std::move(preface));
}

Http2Adapter::Http2Adapter(Worker& worker, AcceptedClient client)
    : worker_(worker),
      client_(std::move(client)),
      connection_(client_.stream, Http2OptionsFor(*worker.Current()->state->config),
                  [this](Http2Stream& s) { return Serve(s); }) {
  client_.count.Serve(this);
  connection_.OnHeaderTooLarge([this](Http2Stream&) { LogHeaderTooLarge(); });
  connection_.OnStallBound([this](Http2Stream&) { WarnStallBound(); });
}

Http2Adapter::~Http2Adapter() {
  if (auto* tls = std::get_if<TlsStream>(&client_.stream)) KeepSessionOnClose(tls->native_handle());
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
      client_.peer_ip, Http2Options{}.max_stalled_streams);
}

void Http2Adapter::LogHeaderTooLarge() {
  const GatewayState& state = *worker_.Current()->state;
  Exchange ex;
  const store::Instant now = state.clock->Now();
  ex.start_ms = now.ms;
  ex.started = now.steady;
  ex.version = 20;
  NoteAnswer(Refuse(Refusal::kHeaderTooLarge), 0, ex);
  LogExchange(state, worker_.metrics(), client_.peer_ip, ex);
}

Task<void> Http2Adapter::Run(std::unique_ptr<Http2Adapter> /*self*/, std::string preface) {
  // A drain that began while the connection started.
  if (worker_.draining()) Drain();
  co_await connection_.Run(asio::buffer(preface));
}

void Http2Adapter::Drain() {
  draining_ = true;
  connection_.Shutdown();
}

bool Http2Adapter::CloseIfIdleKeepAlive() {
  if (!served_ || draining_ || connection_.busy_streams() > 0) return false;
  Drain();
  return true;
}

// Not a coroutine: it hands over the one that serves the stream.
Task<void> Http2Adapter::Serve(Http2Stream& stream) {
  served_ = true;
  StreamExchange::Kind kind = StreamExchange::Kind::kForward;
  if (IsDecisionListener(*worker_.Current()->state->config, client_.listener)) {
    // The decision listener answers instead of forwarding: gRPC calls are
    // Envoy's RLS, anything else asks the check endpoint.
    if (IsGrpc(stream.request()[http::field::content_type])) {
      return ServeDecisionStream(worker_, stream, client_.peer_ip, client_.peer_address);
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

Task<ClientWatch::Held> StreamExchange::Hold(Timer& timer) {
  return HoldStream(stream_, hold_timer_, timer);
}

void StreamExchange::RecordGrpc(int grpc_status) {
  if (!grpc_ || ex_.route_metric < 0) return;
  if (ThreadMetrics* metrics = worker_.metrics()) {
    metrics->RecordGrpcResponse(ex_.route_metric, grpc_status);
  }
}

void StreamExchange::OnHead(const GatewayState&, Exchange& ex) {
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

Task<void> StreamExchange::FailUpstream(ConnectFailure failure, const ErrorCode& ec) {
  const Refusal refusal = UpstreamFailed(ex_, failure, ec, worker_.metrics());
  if (response_started_) {
    stream_.Reset(Http2ErrorCode::kInternalError);
    ex_.error = "upstream_body";
    co_return;
  }
  answer_ = Refuse(refusal);
  co_await Reply();
}


}  // namespace tollgate::gateway
