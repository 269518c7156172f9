// The forward of an HTTP/2 stream to an HTTP/1.1 upstream: the forward
// prologue every upstream protocol shares (forwarded fields, the upstream's
// own admission, 100-continue), the head through AppendWireHeader, the body
// from ReadBody (chunked when the client gave no length), and the response
// back through Relay and the response filter.
#include <array>
#include <boost/asio/write.hpp>

#include "gateway/core/forward.h"
#include "gateway/core/response_filter.h"
#include "gateway/io/wire_header.h"
#include "gateway/h2/stream_exchange.h"
#include "gateway/io/read_util.h"
#include "gateway/io/relay.h"

namespace tollgate::gateway {

bool StreamExchange::StartForward(const rules::RouteConfig& route) {
  const Scheme scheme =
      state().listener_tls[adapter_.client_.listener] ? Scheme::kHttps : Scheme::kHttp;
  // An HTTP/1.1 upstream gets the header only as AppendWireHeader's text.
  const bool http2 = generation_->http2_pools[route.upstream_index] != nullptr;
  // (Read before PrepareForwardedHead, which removes Expect.)
  expects_continue_ =
      stream_.has_body() && beast::iequals(stream_.request()[http::field::expect], "100-continue");
  PrepareForwardedHead(config_, stream_.request(), adapter_.client_.peer_ip, scheme,
                       ClientProtocol::kHttp2, http2 ? nullptr : &forwarded_lines_);
  return true;
}

Task<bool> StreamExchange::ReadBodyForCost() {
  if (!stream_.has_body()) co_return true;
  auto& req = stream_.request();
  if (beast::iequals(req[http::field::expect], "100-continue")) {
    // Asked for now, before admit decides; the upstream is not asked again.
    req.erase(http::field::expect);
    SubmitContinue();
  }
  const auto limit = static_cast<std::uint64_t>(config_.limits.max_body_bytes);
  char* buffer = Buffer();
  read_body_.emplace();
  for (;;) {
    const Http2Read r = co_await stream_.ReadBody(asio::buffer(buffer, kRelayChunk),
                                                  Budget(config_.timeouts.client_body_ms));
    if (!r.ec) ex_.bytes_in += r.bytes;
    if (r.ec || ex_.bytes_in > limit) {
      if (RefuseBody(StreamBodyFailure(r.ec), answer_)) co_await Reply();
      co_return false;
    }
    read_body_->append(buffer, r.bytes);
    if (r.end) break;
  }
  SetLength(read_body_->size());
  co_return true;
}

void StreamExchange::SubmitContinue() {
  http::response_header<Fields> interim;
  interim.result(http::status::continue_);
  stream_.SubmitResponse(interim, Http2Body::kNone);
}

void StreamExchange::ReplaceBody(std::string body) {
  if (!read_body_) return;
  *read_body_ = std::move(body);
  SetLength(read_body_->size());
}

void StreamExchange::SetLength(std::size_t bytes) {
  stream_.request().set(http::field::content_length, std::to_string(bytes));
}

Task<void> StreamExchange::ExchangeWithUpstream(const rules::RouteConfig& route,
                                                const rules::UpstreamConfig& upstream) {
  if (expects_continue_) SubmitContinue();
  if (Http2UpstreamPool* pool = generation_->http2_pools[route.upstream_index].get()) {
    co_await ExchangeHttp2(*pool, upstream);
  } else {
    co_await ExchangeHttp1(route, upstream);
  }
}

Task<void> StreamExchange::ExchangeHttp1(const rules::RouteConfig& route,
                                         const rules::UpstreamConfig& upstream) {
  auto& req = stream_.request();
  const bool has_body = stream_.has_body();
  UpstreamCall call(*generation_->pools[route.upstream_index]);
  call.head_request = req.method() == http::verb::head;
  // A body read from the stream cannot be sent twice.
  call.replayable = IsIdempotent(req.method()) && !has_body;
  const bool chunked =
      has_body && !read_body_ && req.find(http::field::content_length) == req.end();
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
    hold.emplace(worker_, adapter_.upstreams_held_, tied_);
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
  if (read_body_) {
    // Read already, for its cost: sent with its length (its trailers, if
    // any, have no place in a request framed by length).
    Lowest(c.stream).expires_after(Budget(timeouts.upstream_response_ms));
    auto [ec, n] = co_await Visit(
        c.stream, [&](auto& s) { return asio::async_write(s, asio::buffer(*read_body_), kUseTuple); });
    if (ec) {
      upstream_ec = ec;
      co_return BodySent::kUpstreamFailed;
    }
    co_return BodySent::kDone;
  }
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
  // its size: a kRelayChunk one for every response costs the allocator far
  // more (docs/performance.md).
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
    // Seen once on its way: the client does not wait for what looks at it.
    filter.Body(buffer, got);
    if (!done) continue;
    filter.End();
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

}  // namespace tollgate::gateway
