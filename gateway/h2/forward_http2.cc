// The forward of an HTTP/2 stream to an HTTP/2 upstream (h2, h2c): a
// stream of the pool's, the request body relayed by its own coroutine
// (PumpRequestBody) while the response is relayed, so that both directions
// flow at once, as a bidirectional gRPC call needs; trailers both ways.
#include <boost/asio/co_spawn.hpp>

#include "gateway/core/forward.h"
#include "gateway/core/response_filter.h"
#include "gateway/io/wire_header.h"
#include "gateway/h2/stream_exchange.h"
#include "gateway/io/relay.h"

namespace tollgate::gateway {

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
  if (read_body_) {
    // Read already, for its cost: sent whole, then the trailers.
    const Fields trailers = ForwardableRequestTrailers(stream_.trailers(), config_.identity);
    const bool has_trailers = trailers.begin() != trailers.end();
    ErrorCode ec = co_await up.WriteBody(asio::buffer(*read_body_),
                                         has_trailers ? BodyEnd::kMore : BodyEnd::kLast,
                                         Budget(timeouts.upstream_response_ms));
    if (!ec && has_trailers) ec = up.EndBody(trailers);
    if (ec) {
      pump_ec_ = ec;
      pumped_ = Pumped::kUpstreamFailed;
    } else {
      pumped_ = Pumped::kDone;
    }
    pump_end_->Notify();
    co_return;
  }
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
    // Seen once on its way: the client does not wait for what looks at it.
    filter.Body(buffer, r.bytes);
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
