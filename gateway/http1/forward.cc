#include <boost/asio/write.hpp>

#include "gateway/core/forward.h"
#include "gateway/core/http_util.h"
#include "gateway/core/response_filter.h"
#include "gateway/core/upstream_call.h"
#include "gateway/io/wire_header.h"
#include "gateway/http1/connection.h"
#include "gateway/http1/websocket_tunnel.h"
#include "gateway/http2/upstream_pool.h"
#include "gateway/io/read_util.h"
#include "gateway/io/relay.h"

// The forward phase of the HTTP/1.1 adapter: the request to the upstream
// (buffered, or its body relayed as it comes), the response back (buffered
// or relayed), the answers to upstream failures, and the WebSocket tunnel a
// 101 opens.
namespace tollgate::gateway {
namespace {

// Bodies up to this size are read whole and written with their header in one
// write; larger or chunked bodies are streamed through the relay buffer.
constexpr std::uint64_t kBufferedBody = 64 * 1024;

constexpr std::string_view kWebSocketToHttp2 =
    "WebSocket needs an upstream with protocol = \"http1\"";

}  // namespace

Task<ErrorCode> Http1Connection::WriteContinue() {
  static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
  Lowest(stream_).expires_after(Ms(config_->timeouts.client_body_ms));
  auto [ec, n] = co_await Visit(stream_, [&](auto& s) {
    return asio::async_write(s, asio::buffer(kContinue.data(), kContinue.size()), kUseTuple);
  });
  co_return ec;
}

// What Forward's steps share about one upstream exchange.
struct Http1Connection::ForwardCall : UpstreamCall {
  using UpstreamCall::UpstreamCall;
  bool buffered = false;  // the request body (if any) is read whole before sending
};

bool Http1Connection::StartForward(const rules::RouteConfig& route) {
  // A body read whole for its cost took the header with it.
  auto& req = work_->whole ? work_->whole->get().base() : work_->head->get();
  const bool chunked = !work_->whole && work_->head->chunked();
  const bool buffered =
      work_->whole || (!chunked && work_->head->content_length().value_or(0) <= kBufferedBody);
  if (websocket_ && generation_->http2_pools[route.upstream_index] != nullptr) {
    // A WebSocket over HTTP/2 (RFC 8441) is not offered to upstreams.
    work_->answer = RefuseWith(Refusal::kNotImplemented, kWebSocketToHttp2);
    if (!buffered) CloseWithBodyUnread(work_->exchange);
    return false;
  }
  // (Read before PrepareForwardedHead, which removes Expect.)
  expects_continue_ = beast::iequals(req[http::field::expect], "100-continue");
  PrepareForwardedHead(*config_, req, peer_ip_,
                       generation_->state->listener_tls[listener_] ? Scheme::kHttps : Scheme::kHttp,
                       ClientProtocol::kHttp1);
  req.version(11);
  if (chunked) work_->head->get().chunked(true);
  if (websocket_) {
    // The upgrade fields are hop-by-hop, but a handshake goes on with them.
    req.set(http::field::upgrade, "websocket");
    req.set(http::field::connection, "Upgrade");
  }
  return true;
}

bool Http1Connection::ReadsBeforeUpstream() const {
  if (work_->whole) return false;  // read already, for its cost
  const HeadParser& head = *work_->head;
  return head.chunked() || head.content_length().value_or(0) > 0;
}

Task<bool> Http1Connection::ReadBeforeUpstream() {
  HeadParser& head = *work_->head;
  Exchange& ex = work_->exchange;
  if (expects_continue_) {
    if (co_await WriteContinue()) {
      ex.close = true;
      co_return false;
    }
  }
  // Chunked or large: streamed to the upstream as it comes.
  if (head.chunked() || head.content_length().value_or(0) > kBufferedBody) co_return true;
  co_return co_await ReadWhole();
}

Task<bool> Http1Connection::ReadBodyForCost() {
  HeadParser& head = *work_->head;
  if (!head.chunked() && head.content_length().value_or(0) == 0) co_return true;
  auto& req = head.get();
  if (beast::iequals(req[http::field::expect], "100-continue")) {
    // Asked for now, before admit decides; the upstream is not asked again.
    req.erase(http::field::expect);
    if (co_await WriteContinue()) {
      work_->exchange.close = true;
      co_return false;
    }
  }
  // A chunked body's trailers join the parsed message's fields: the ones
  // beyond the header's are dropped, as a body sent with its length has
  // no trailer section (and admit decided on the header alone).
  const auto fields = static_cast<std::size_t>(std::distance(req.begin(), req.end()));
  const bool read = co_await ReadWhole();
  if (!read) co_return false;
  // Forwarded with its length, whatever its framing was.
  auto& whole = work_->whole->get();
  auto trailer = whole.begin();
  std::advance(trailer, static_cast<std::ptrdiff_t>(fields));
  while (trailer != whole.end()) trailer = whole.erase(trailer);
  if (whole.chunked()) whole.chunked(false);
  whole.content_length(whole.body().size());
  co_return true;
}

void Http1Connection::ReplaceBody(std::string body) {
  if (!work_->whole) return;
  auto& whole = work_->whole->get();
  whole.body() = std::move(body);
  whole.content_length(whole.body().size());
}

Task<bool> Http1Connection::ReadWhole() {
  Exchange& ex = work_->exchange;
  work_->whole.emplace(std::move(*work_->head));
  work_->whole->body_limit(static_cast<std::uint64_t>(config_->limits.max_body_bytes));
  ErrorCode ec;
  if (!ParseBuffered(work_->buffer, *work_->whole, ec)) {
    Lowest(stream_).expires_after(Budget(config_->timeouts.client_body_ms, ex));
    std::tie(ec, std::ignore) = co_await Visit(stream_, [&](auto& s) {
      return http::async_read(s, work_->buffer, *work_->whole, kUseTuple);
    });
  }
  if (ec) {
    co_await FailBody(ec, ex);
    co_return false;
  }
  ex.bytes_in = work_->whole->get().body().size();
  co_return true;
}

void Http1Connection::RefusedBeforeUpstream(Exchange& ex) {
  // An unread body would be taken for the next request.
  if (!work_->whole && !work_->head->is_done()) CloseWithBodyUnread(ex);
}

Task<void> Http1Connection::ExchangeWithUpstream(const rules::RouteConfig& route,
                                                 const rules::UpstreamConfig& upstream) {
  HeadParser& head = *work_->head;
  Exchange& ex = work_->exchange;
  const store::Clock& clock = *generation_->state->clock;
  const rules::TimeoutsConfig& timeouts = config_->timeouts;
  // (A buffered body took the header with it: `head` is what is left.)
  auto& req = work_->whole ? work_->whole->get().base() : head.get();
  const bool buffered = work_->whole || (!head.chunked() && head.content_length().value_or(0) == 0);
  Http2UpstreamPool* http2 = generation_->http2_pools[route.upstream_index].get();
  if (http2 != nullptr) {
    co_await ForwardHttp2(*http2, head, upstream, ex);
    co_return;
  }
  ForwardCall call(*generation_->pools[route.upstream_index]);
  call.head_request = req.method() == http::verb::head;
  // A streamed body cannot be sent twice (SendStreamed does not retry).
  call.replayable = IsIdempotent(req.method()) && buffered;
  call.buffered = buffered;
  bool sent = false;
  if (call.buffered) {
    sent = co_await SendBuffered(call, head, ex);
  } else {
    sent = co_await SendStreamed(call, head, ex);
  }
  if (!sent) co_return;
  if (websocket_ && work_->res_head->get().result() == http::status::switching_protocols) {
    // The tunnel holds the upstream place (and the session the
    // max_inflight ones) until it closes.
    co_await OpenTunnel(call, upstream, req[http::field::sec_websocket_key], ex);
    co_return;
  }

  // The response as the client sees it.
  auto& res = work_->res_head->get();
  // (The parser's flags: the framing fields go with the hop-by-hop ones.)
  bool upstream_reusable = work_->res_head->keep_alive();
  const bool res_chunked = work_->res_head->chunked();
  const auto res_length = work_->res_head->content_length();
  const bool no_body = work_->res_head->is_done();
  const bool until_close = !no_body && !res_chunked && !res_length;
  ResponseFilter(ex).Head(*generation_->state, &work_->admission, upstream,
                          UpstreamProtocol::kHttp1, res, work_->extra_headers);
  res.version(11);
  if (until_close) {
    upstream_reusable = false;
    // An HTTP/1.0 client cannot read chunks: the end of the body is the close.
    if (ex.version >= 11) {
      res.chunked(true);
    } else {
      ex.close = true;
    }
  } else if (res_chunked) {
    if (ex.version >= 11) {
      res.chunked(true);
    } else {
      ex.close = true;
    }
  }
  if (worker_.draining()) ex.close = true;
  // An HTTP/1.1 response keeps the connection unless it says otherwise, and
  // its Connection field went with the hop-by-hop ones.
  if (ex.close) res.insert(http::field::connection, "close");

  const RelayTimeouts to_client{Budget(timeouts.upstream_response_ms, ex),
                                Budget(timeouts.client_body_ms, ex), SteadyDeadline(ex)};
  bool complete = false;
  if (no_body) {
    MarkUpstreamEnd(clock, ex);
    ResponseFilter(ex).End();
    work_->wire.clear();
    AppendWireHeader(res.base(), work_->wire, work_->extra_headers);
    ErrorCode wec;
    if (!TryWriteWire(stream_, wec, ex.close)) {
      wec = co_await WriteWire(stream_, to_client.Within(to_client.write));
    }
    if (wec) ex.close = true;
    complete = true;
  } else if (res_length && *res_length <= kBufferedBody) {
    complete = co_await RespondBuffered(call, to_client, ex);
  } else {
    complete = co_await RespondStreamed(call, to_client, ex);
  }
  if (complete && upstream_reusable) call.pool.Release(std::move(call.conn));
}

Task<bool> Http1Connection::SendBuffered(ForwardCall& call, HeadParser& head, Exchange& ex) {
  const std::int64_t connect_ms = config_->timeouts.upstream_connect_ms;
  for (Attempt attempt = Attempt::kFirst;; attempt = Attempt::kRetry) {
    ConnectResult cr = TakePooled(call, attempt);
    if (!cr.connection) cr = co_await ConnectUpstream(call, attempt, connect_ms);
    ex.upstream = cr.server;
    if (!cr.connection) {
      co_await FailUpstream(call, cr.failure, {}, ex);
      co_return false;
    }
    call.conn = std::move(cr.connection);
    work_->wire.clear();
    if (work_->whole) {
      AppendWireHeader(work_->whole->get().base(), work_->wire);
      work_->wire.append(work_->whole->get().body());
    } else {
      AppendWireHeader(head.get().base(), work_->wire);
    }
    ErrorCode ec;
    if (!TryWriteWire(call.conn->stream, ec)) {
      ec =
          co_await WriteWire(call.conn->stream, Budget(config_->timeouts.upstream_response_ms, ex));
    }
    std::size_t received = 0;
    if (!ec) {
      std::tie(ec, received) = co_await ReadResponseHead(
          call, work_->res_head, Budget(config_->timeouts.upstream_response_ms, ex));
    }
    if (!ec) co_return true;
    if (RetryOnFresh(call, attempt, received, ec)) continue;
    co_await FailUpstream(call, ConnectFailure::kNone, ec, ex);
    co_return false;
  }
}

Task<bool> Http1Connection::SendStreamed(ForwardCall& call, HeadParser& head, Exchange& ex) {
  const rules::TimeoutsConfig& timeouts = config_->timeouts;
  ConnectResult cr = TakePooled(call, Attempt::kFirst);
  if (!cr.connection) {
    cr = co_await ConnectUpstream(call, Attempt::kFirst, timeouts.upstream_connect_ms);
  }
  ex.upstream = cr.server;
  if (!cr.connection) {
    co_await FailUpstream(call, cr.failure, {}, ex);
    co_return false;
  }
  call.conn = std::move(cr.connection);
  RequestParser<http::buffer_body> streamed{std::move(head)};
  streamed.body_limit(static_cast<std::uint64_t>(config_->limits.max_body_bytes));
  const RelayTimeouts to_upstream{Budget(timeouts.client_body_ms, ex),
                                  Budget(timeouts.upstream_response_ms, ex), SteadyDeadline(ex)};
  RelayResult relayed = co_await Relay(stream_, work_->buffer, streamed, call.conn->stream,
                                       RelayBuffer(), work_->wire, to_upstream);
  ex.bytes_in = relayed.bytes;
  if (relayed.failure == RelayFailure::kRead) {
    co_await FailBody(relayed.ec, ex);
    co_return false;
  }
  ErrorCode ec = relayed.ec;
  if (!ec) {
    std::tie(ec, std::ignore) =
        co_await ReadResponseHead(call, work_->res_head, Budget(timeouts.upstream_response_ms, ex));
  }
  if (ec) {
    ex.close = true;
    co_await FailUpstream(call, ConnectFailure::kNone, ec, ex);
    co_return false;
  }
  co_return true;
}

BodyFailure Http1Connection::BodyFailureOf(const ErrorCode& ec) {
  if (ec == http::error::body_limit) return BodyFailure::kTooLarge;
  if (ec == beast::error::timeout) return BodyFailure::kTimeout;
  return IsClientGone(ec) ? BodyFailure::kClientGone : BodyFailure::kMalformed;
}

Task<void> Http1Connection::FailBody(const ErrorCode& ec, Exchange& ex) {
  ex.close = true;
  const BodyFailure failure = BodyFailureOf(ec);
  // The rest of the body is unread (too large, or malformed): the close
  // lingers, so that what the client still sends cannot make the kernel
  // reset the connection before the client has read the answer. (A read
  // that timed out has ended receiving already: nothing to linger on.)
  if (failure == BodyFailure::kTooLarge || failure == BodyFailure::kMalformed) {
    CloseWithBodyUnread(ex);
  }
  if (RefuseBody(failure, work_->answer)) co_await Reply(ex);
}

Task<void> Http1Connection::FailUpstream(ForwardCall& call, ConnectFailure failure, const ErrorCode& ec,
                                 Exchange& ex) {
  // An unread request body would be taken for the next request.
  if (!call.buffered) CloseWithBodyUnread(ex);
  work_->answer = Refuse(UpstreamFailed(ex, failure, ec, worker_.metrics()));
  co_await Reply(ex);
}

Task<bool> Http1Connection::RespondBuffered(ForwardCall& call, const RelayTimeouts& to_client,
                                    Exchange& ex) {
  const store::Clock& clock = *generation_->state->clock;
  UpstreamConnection& c = *call.conn;
  ResponseParser<http::string_body> body{std::move(*work_->res_head)};
  body.body_limit(boost::none);
  ErrorCode rec;
  if (!ParseBuffered(c.buffer, body, rec)) {
    Lowest(c.stream).expires_after(to_client.read);
    std::tie(rec, std::ignore) = co_await Visit(
        c.stream, [&](auto& s) { return http::async_read(s, c.buffer, body, kUseTuple); });
  }
  MarkUpstreamEnd(clock, ex);
  if (rec) {
    ex.close = true;
    co_await FailUpstream(call, ConnectFailure::kNone, rec, ex);
    co_return false;
  }
  const ResponseFilter filter(ex);
  filter.Body(body.get().body());
  filter.End();
  work_->wire.clear();
  AppendWireHeader(body.get().base(), work_->wire, work_->extra_headers);
  work_->wire.append(body.get().body());
  ex.bytes_out = body.get().body().size();
  ErrorCode wec;
  // The body took its time to arrive: the write gets what is left.
  if (!TryWriteWire(stream_, wec, ex.close)) {
    wec = co_await WriteWire(stream_, to_client.Within(to_client.write));
  }
  if (wec) ex.close = true;
  co_return true;
}

Task<bool> Http1Connection::RespondStreamed(ForwardCall& call, const RelayTimeouts& to_client,
                                    Exchange& ex) {
  const store::Clock& clock = *generation_->state->clock;
  UpstreamConnection& c = *call.conn;
  AddHeaderLines(work_->extra_headers, work_->res_head->get());
  ResponseParser<http::buffer_body> streamed{std::move(*work_->res_head)};
  streamed.body_limit(boost::none);
  const ResponseFilter filter(ex);
  RelayResult relayed =
      co_await Relay(c.stream, c.buffer, streamed, stream_, RelayBuffer(), work_->wire, to_client,
                     [filter](const char* data, std::size_t size) { filter.Body(data, size); });
  MarkUpstreamEnd(clock, ex);
  ex.bytes_out = relayed.bytes;
  if (relayed.failure == RelayFailure::kNone) {
    filter.End();
    co_return true;
  }
  ex.close = true;
  if (!relayed.header_sent && relayed.failure == RelayFailure::kRead) {
    // The body that came with the header was bad: the client has seen
    // nothing yet, and hears why.
    work_->answer =
        Refuse(UpstreamFailed(ex, ConnectFailure::kNone, relayed.ec, worker_.metrics()));
    co_await Reply(ex);
    co_return false;
  }
  // Headers are out: the only honest signal left is closing the connection.
  if (relayed.failure == RelayFailure::kRead) ex.error = "upstream_body";
  co_return false;
}

Task<void> Http1Connection::OpenTunnel(ForwardCall& call, const rules::UpstreamConfig& upstream,
                               std::string_view key, Exchange& ex) {
  MarkUpstreamEnd(*generation_->state->clock, ex);
  ex.close = true;  // the connection is the tunnel's now, or failed
  auto& res = work_->res_head->get();
  if (!AcceptsHandshake(res, key)) {
    // call.conn is dropped, not pooled: the upstream thinks it switched.
    work_->answer =
        RefuseWith(Refusal::kBadGateway, "the upstream's WebSocket handshake answer is not valid");
    co_await Reply(ex);
    co_return;
  }
  ResponseFilter(ex).Head(*generation_->state, &work_->admission, upstream,
                          UpstreamProtocol::kHttp1, res, work_->extra_headers,
                          ResponseKind::kWebSocketUpgrade);
  res.version(11);
  work_->wire.clear();
  AppendWireHeader(res.base(), work_->wire, work_->extra_headers);
  ErrorCode ec;
  if (!TryWriteWire(stream_, ec)) {
    ec = co_await WriteWire(stream_, Budget(config_->timeouts.client_body_ms, ex));
  }
  if (ec) co_return;
  TunnelOptions options;
  options.idle = Ms(config_->timeouts.websocket_idle_ms);
  options.metrics = worker_.metrics();
  if (ex.route_metric >= 0) options.route_metric = ex.route_metric;
  options.messages = {work_->admission.message_rules(), generation_->state.get(), &worker_.store(),
                      NegotiatedCompression(res)};
  const TunnelResult tunnel =
      co_await RunTunnel(stream_, work_->buffer, call.conn->stream, call.conn->buffer, options);
  ex.bytes_in = tunnel.bytes_in;
  ex.bytes_out = tunnel.bytes_out;
  if (!tunnel.error.empty()) ex.error = tunnel.error;
}

}  // namespace tollgate::gateway
