#include "gateway/core/forward.h"
#include "gateway/core/http_util.h"
#include "gateway/core/response_filter.h"
#include "gateway/core/upstream_call.h"
#include "gateway/io/wire_header.h"
#include "gateway/http1/connection.h"
#include "gateway/http2/upstream_pool.h"
#include "gateway/io/read_util.h"
#include "gateway/io/relay.h"

// The forward phase of the HTTP/1.1 adapter towards an upstream with
// protocol = "h2" or "h2c": the request goes out as one stream of the
// upstream's pool (gateway/http2/upstream_pool.h) and its answer comes back
// as an HTTP/1.1 response. HTTP/1.1 has no request and response flowing at
// once within one exchange, so the body is sent first and the response read
// after it; an upstream that answers early (a 413) and resets the stream is
// still heard.
namespace tollgate::gateway {
Task<void> Http1Connection::ForwardHttp2(Http2UpstreamPool& pool, HeadParser& head,
                                 const rules::UpstreamConfig& upstream, Exchange& ex) {
  const rules::TimeoutsConfig& timeouts = config_->timeouts;
  const bool whole = work_->whole.has_value();
  const bool streamed = !whole && (head.chunked() || head.content_length().value_or(0) > 0);
  const http::request_header<Fields>& req = whole ? work_->whole->get().base() : head.get().base();
  Http2OpenResult open =
      co_await pool.Open(req, whole || streamed ? Http2Body::kFollows : Http2Body::kNone,
                         Budget(timeouts.upstream_connect_ms, ex));
  ex.upstream = open.server;
  ErrorCode ec;
  if (open.stream && whole) {
    ec = co_await open.stream.WriteBody(asio::buffer(work_->whole->get().body()), BodyEnd::kLast,
                                        Budget(timeouts.upstream_response_ms, ex));
  } else if (open.stream && streamed) {
    const bool client_ok = co_await SendBodyHttp2(open.stream, head, ex, ec);
    if (!client_ok) co_return;
  }
  // A body refused midway may still have its answer waiting: a reset
  // stream keeps what it received; a body that timed out has none.
  if (open.stream && ec != beast::error::timeout) {
    ec = co_await open.stream.ReadResponseHead(Budget(timeouts.upstream_response_ms, ex));
  }
  if (!open.stream || ec) {
    // An unread request body would be taken for the next request.
    if (streamed && !open.stream) CloseWithBodyUnread(ex);
    work_->answer = Refuse(UpstreamFailed(ex, open.failure, ec, worker_.metrics()));
    co_await Reply(ex);
    co_return;
  }
  co_await RespondHttp2(open.stream, upstream, ex);
}

Task<bool> Http1Connection::SendBodyHttp2(Http2UpstreamStream& up, HeadParser& head, Exchange& ex,
                                  ErrorCode& upstream_ec) {
  const rules::TimeoutsConfig& timeouts = config_->timeouts;
  RequestParser<http::buffer_body> body{std::move(head)};
  body.body_limit(static_cast<std::uint64_t>(config_->limits.max_body_bytes));
  auto& piece = body.get().body();
  char* buffer = RelayBuffer();
  while (!body.is_done()) {
    piece.data = buffer;
    piece.size = kRelayChunk;
    Lowest(stream_).expires_after(Budget(timeouts.client_body_ms, ex));
    auto [ec, n] = co_await Visit(
        stream_, [&](auto& s) { return http::async_read_some(s, work_->buffer, body, kUseTuple); });
    if (ec == http::error::need_buffer) ec = {};
    if (ec) {
      co_await FailBody(ec, ex);
      co_return false;
    }
    const std::size_t got = kRelayChunk - piece.size;
    const bool done = body.is_done();
    ex.bytes_in += got;
    if (got == 0 && !done) continue;
    upstream_ec = co_await up.WriteBody(asio::buffer(buffer, got),
                                        done ? BodyEnd::kLast : BodyEnd::kMore,
                                        Budget(timeouts.upstream_response_ms, ex));
    if (upstream_ec) {
      ex.close = ex.close || !done;
      co_return true;
    }
  }
  co_return true;
}

Task<void> Http1Connection::RespondHttp2(Http2UpstreamStream& up, const rules::UpstreamConfig& upstream,
                                 Exchange& ex) {
  const rules::TimeoutsConfig& timeouts = config_->timeouts;
  const store::Clock& clock = *generation_->state->clock;
  auto& res = up.response();
  ResponseFilter filter(ex);
  filter.Head(*generation_->state, &work_->admission, upstream, UpstreamProtocol::kHttp2, res,
              work_->extra_headers);
  res.version(11);
  const bool has_body = up.response_has_body();
  const bool has_length = res.find(http::field::content_length) != res.end();
  // Without the upstream's length the body is chunked; so is a body whose
  // trailers are announced (Trailer), so that they come in its last chunk.
  // An HTTP/1.0 client cannot read chunks: for it the end of a body without
  // length is the close, and trailers are dropped.
  const bool announces_trailers = res.find(http::field::trailer) != res.end();
  const bool framed = has_body && ex.version >= 11 && (announces_trailers || !has_length);
  if (framed) {
    res.erase(http::field::content_length);
    res.set(http::field::transfer_encoding, "chunked");
  } else {
    if (has_body && !has_length) ex.close = true;
    // Trailers that cannot be sent are not promised.
    res.erase(http::field::trailer);
  }
  if (worker_.draining()) ex.close = true;
  if (ex.close) res.set(http::field::connection, "close");
  work_->wire.clear();
  AppendWireHeader(res, work_->wire, work_->extra_headers);
  // The header goes out at once (the reader of a streamed response wants
  // it before the first piece), then each piece of the body as it comes.
  char* buffer = RelayBuffer();
  for (bool end = !has_body;;) {
    if (end) {
      MarkUpstreamEnd(clock, ex);
      filter.End();
    }
    ErrorCode wec;
    if (!TryWriteWire(stream_, wec, end && ex.close)) {
      wec = co_await WriteWire(stream_, Budget(timeouts.client_body_ms, ex));
    }
    if (wec) {
      ex.close = true;
      co_return;
    }
    if (end) co_return;
    const Http2Read r = co_await up.ReadBody(asio::buffer(buffer, kRelayChunk),
                                             Budget(timeouts.upstream_response_ms, ex));
    if (r.ec) {
      // Headers are out: the only honest signal left is closing the
      // connection.
      ex.close = true;
      ex.error = "upstream_body";
      co_return;
    }
    ex.bytes_out += r.bytes;
    filter.Body(buffer, r.bytes);
    end = r.end;
    work_->wire.clear();
    if (framed && r.bytes > 0) AppendChunkSizeLine(r.bytes, work_->wire);
    work_->wire.append(buffer, r.bytes);
    if (framed && r.bytes > 0) work_->wire += "\r\n";
    if (framed && end) AppendLastChunk(up.trailers(), work_->wire);
  }
}

}  // namespace tollgate::gateway
