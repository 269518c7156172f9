#include "gateway/http1/connection.h"

#include <boost/asio/write.hpp>

#include "gateway/core/http_util.h"
#include "gateway/core/identify.h"
#include "gateway/core/log.h"
#include "gateway/core/request_id.h"
#include "gateway/http1/websocket_tunnel.h"
#include "gateway/io/linger.h"
#include "gateway/io/read_now.h"
#include "gateway/io/read_util.h"
#include "gateway/io/relay.h"
#include "gateway/io/tls.h"
#include "gateway/io/wire_write.h"

namespace tollgate::gateway {

Task<void> Http1Connection::Serve(Worker& worker, AcceptedClient client,
                                  std::unique_ptr<ExchangeWork> first) {
  auto connection = std::make_unique<Http1Connection>(worker, std::move(client), std::move(first));
  Http1Connection& self = *connection;
  return self.Run(std::move(connection));
}

Http1Connection::Http1Connection(Worker& worker, AcceptedClient client,
                                 std::unique_ptr<ExchangeWork> first)
    : worker_(worker),
      generation_(worker.Current()),
      config_(generation_->state->config.get()),
      count_(std::move(client.count)),
      stream_(std::move(client.stream)),
      listener_(client.listener),
      peer_ip_(std::move(client.peer_ip)),
      peer_address_(client.peer_address),
      client_cert_(std::move(client.client_cert)),
      work_(std::move(first)),
      tickets_owed_(client.tickets_owed) {
  count_.Serve(this);
}

Http1Connection::~Http1Connection() {
  if (auto* tls = std::get_if<TlsStream>(&stream_)) KeepSessionOnClose(tls->native_handle());
}

void Http1Connection::CloseIfIdle() {
  if (idle_ && !closing_) {
    closing_ = true;
    Lowest(stream_).cancel();
  }
}

bool Http1Connection::CloseIfIdleKeepAlive() {
  if (!served_ || !idle_ || closing_) return false;
  CloseIfIdle();
  return true;
}

std::chrono::milliseconds Http1Connection::Budget(std::int64_t op_ms, const Exchange& ex) const {
  const std::int64_t left = ex.deadline_ms - generation_->state->clock->NowMs();
  return Ms(std::max<std::int64_t>(1, std::min(op_ms, left)));
}

std::chrono::steady_clock::time_point Http1Connection::SteadyDeadline(const Exchange& ex) const {
  return store::LoopNow() + Ms(ex.deadline_ms - generation_->state->clock->NowMs());
}

Task<void> Http1Connection::Run(std::unique_ptr<Http1Connection> self) {
  // config_ changes with reloads between exchanges (and the old one may be
  // gone): read it afresh each time, never keep a reference into it here.
  // Over TLS, the session tickets go out with the first response (HeadEnded
  // issues them once the request head is in): a client that never sends a
  // request gets none; one that does has them before its answer.
  for (;;) {
    // A drain ends the connection between exchanges, pipelined requests
    // unanswered; not before the first, whose bytes the start step may
    // have read already.
    if (worker_.draining() && served_) break;
    if (!work_ || work_->buffer.size() == 0) {
      if (worker_.draining()) break;
      // Waiting for the first byte of the next request is idleness, with its
      // own (longer) deadline; the header then has client_header to arrive.
      idle_ = true;
      idle_swept_ = false;
      Rest();
      Lowest(stream_).expires_after(
          Ms(served_ ? config_->timeouts.client_idle_ms : config_->timeouts.client_header_ms));
      NoteHeldBytes(stream_);
      if (served_ && !parked_once_) {
        // After its first exchange a connection parks at once: a client
        // that makes one request and stays (a browser, a mobile app) holds
        // no coroutine from then on. A busy one pays this once, and waits
        // here from its next request on.
        parked_once_ = true;
        AwaitRequest(std::move(self));
        co_return;
      }
      ErrorCode ec;
      for (;;) {
        auto [wait_ec, unused] = co_await Lowest(stream_).async_wait_readable(kUseTuple);
        ec = wait_ec;
        if (park_ && ec == asio::error::operation_aborted && !closing_ &&
            !worker_.draining()) {
          // SweepIdle: idle for a sweep interval at least; the wait goes on
          // without this coroutine.
          park_ = false;
          AwaitRequest(std::move(self));
          co_return;
        }
        park_ = false;
        if (WaitEnded(ec)) break;
      }
      EndIdle();
      if (ec) co_return;  // closed, idle timeout or drain: nothing to answer
    }
    // (GCC 12 lays the frame out wrongly for a co_await in an if's
    // condition, PR 106188's kind: a statement of its own.)
    const bool kept = co_await ExchangeDriver<Http1Connection>::Run(*this);
    if (!kept) break;
    served_ = true;
  }
  co_await Shutdown();
}

// How long, in all, a connection closed with the request body unread goes
// on reading what the client sends (nginx waits up to lingering_timeout,
// 5 s, for each read, within lingering_time, 30 s).
constexpr std::chrono::seconds kBodyLinger{5};
// And how much of it, at most (nginx reads on without a bound): a client
// that keeps sending makes it do bounded work.
constexpr std::size_t kBodyLingerBytes = std::size_t{64} << 20;

Task<void> Http1Connection::Shutdown() {
  // A last response left in TlsStream's output (WriteLastOverTls) is sent here:
  // it has the time a response write has, not only a close's.
  Lowest(stream_).expires_after(last_in_tls_ ? Ms(config_->timeouts.client_body_ms)
                                             : std::chrono::milliseconds(1000));
  if (auto* tls = std::get_if<TlsStream>(&stream_)) {
    // close_notify, without waiting for the client's (TlsStream's shutdown
    // does not). SSL_SENT_SHUTDOWN, set by the send, is what keeps the
    // session resumable. The send also carries what WriteLastOverTls() left
    // in the stream's output: the last response.
    SSL* ssl = tls->native_handle();
    // Tickets issued and still unsent (nothing was written or read since:
    // the client left) would make SSL_shutdown fail; nothing is owed to a
    // client that is gone.
    if (SSL_in_init(ssl) == 0) co_await tls->async_shutdown(kUseTuple);
  }
  // An answer sent with the request body unread (a refusal, a failed
  // upstream) ended the connection: send the FIN, then linger
  // (gateway/io/linger.h). A connection that read its bodies does not: the
  // close that follows sends the FIN (shutdown() first would not change
  // what close() sends, a FIN, or a reset if the client sent more).
  if (!body_unread_) co_return;
  ErrorCode ec;
  Lowest(stream_).socket().shutdown(tcp::socket::shutdown_send, ec);
  if (!ec) co_await Linger(Lowest(stream_), kBodyLinger, kBodyLingerBytes);
}

void Http1Connection::CloseWithBodyUnread(Exchange& ex) {
  ex.close = true;
  body_unread_ = true;
}

HeadRead Http1Connection::TakeHead(Refusal& refusal) {
  HeadParser& head = work_->head.emplace();
  head.header_limit(static_cast<std::uint32_t>(config_->limits.max_header_bytes));
  head.body_limit(static_cast<std::uint64_t>(config_->limits.max_body_bytes));
  ErrorCode ec;
  work_->buffer.consume(head.put(work_->buffer.data(), ec));
  if (ec == http::error::need_more) return HeadRead::kNeedMore;
  return HeadEnded(ec, refusal);
}

Task<HeadRead> Http1Connection::ReadHead(Refusal& refusal) {
  Lowest(stream_).expires_after(Ms(config_->timeouts.client_header_ms));
  auto [ec, n] = co_await Visit(stream_, [&](auto& s) {
    return http::async_read_header(s, work_->buffer, *work_->head, kUseTuple);
  });
  co_return HeadEnded(ec, refusal);
}

HeadRead Http1Connection::HeadEnded(const ErrorCode& ec, Refusal& refusal) {
  // Whatever comes next, a body read or the response, carries them.
  IssueTickets();
  if (!ec) return HeadRead::kRead;
  Exchange& ex = work_->exchange;
  ex.close = true;
  if (IsClientGone(ec)) return HeadRead::kClientGone;
  if (ec == http::error::body_limit) CloseWithBodyUnread(ex);  // declared too large
  refusal = ec == http::error::header_limit ? Refusal::kHeaderTooLarge
            : ec == http::error::body_limit ? Refusal::kBodyTooLarge
            : ec == beast::error::timeout   ? Refusal::kRequestTimeout
                                            : Refusal::kBadRequest;
  return HeadRead::kRefused;
}

void Http1Connection::OnHead(const GatewayState&, Exchange& ex) {
  ex.version = work_->head->get().version();
  ex.close = !work_->head->keep_alive();  // the parser's flags: no lookup of Connection
}

bool Http1Connection::UpgradeRefused(const rules::RouteConfig& route) {
  // (The parser's flag first: no field lookup for other requests.)
  websocket_ =
      work_->head->upgrade() && IsWebSocketHandshake(work_->head->get(), !work_->head->is_done());
  if (!websocket_ || route.websocket) return false;
  work_->answer = Refuse(Refusal::kWebSocketDisabled);
  return true;
}

bool Http1Connection::StartReply() {
  Exchange& ex = work_->exchange;
  ErrorCode ec;
  if (!StartReply(ex, ec)) return false;
  if (ec) ex.close = true;
  return true;
}

Task<void> Http1Connection::FinishReply() {
  if (co_await WriteWire(stream_, Ms(config_->timeouts.client_body_ms))) {
    work_->exchange.close = true;
  }
}

Task<void> Http1Connection::WriteCheckAllowed() {
  Exchange& ex = work_->exchange;
  work_->wire.clear();
  AppendCheckAllowed(ex.limits, ex.close ? Persistence::kClose : Persistence::kKeepAlive,
                     ex.request_id, work_->wire);
  ex.status = 200;
  ErrorCode ec;
  if (!TryWriteWire(stream_, ec, ex.close)) {
    ec = co_await WriteWire(stream_, Ms(config_->timeouts.client_body_ms));
  }
  if (ec) ex.close = true;
}

bool Http1Connection::StartReply(Exchange& ex, ErrorCode& ec) {
  work_->wire.clear();
  work_->answer.request_id = EnsureRequestId(ex.request_id);
  const std::size_t body = AppendAnswer(
      work_->answer, ex.close ? Persistence::kClose : Persistence::kKeepAlive, work_->wire);
  NoteAnswer(work_->answer, body, ex);
  return TryWriteWire(stream_, ec, ex.close);
}

Task<void> Http1Connection::Reply(Exchange& ex) {
  ErrorCode ec;
  if (!StartReply(ex, ec)) ec = co_await WriteWire(stream_, Ms(config_->timeouts.client_body_ms));
  if (ec) ex.close = true;
}

bool Http1Connection::TryWriteWire(AnyStream& stream, ErrorCode& ec, bool last) {
  if (last && &stream == &stream_ && std::holds_alternative<TlsStream>(stream) &&
      WriteLastOverTls(std::get<TlsStream>(stream))) {
    return true;
  }
  return gateway::TryWriteWire(stream, work_->wire, ec);
}

bool Http1Connection::WriteLastOverTls(TlsStream& tls) {
  if (!EncryptLastOverTls(tls, work_->wire)) return false;
  last_in_tls_ = true;
  return work_->wire.empty();
}

void Http1Connection::IssueTickets() {
  // Owed only on TLS.
  if (tickets_owed_ > 0) {
    gateway::IssueTickets(std::get<TlsStream>(stream_).native_handle(), tickets_owed_);
  }
}

Task<ErrorCode> Http1Connection::WriteWire(AnyStream& stream, std::chrono::steady_clock::duration timeout) {
  return WriteWireRest(stream, work_->wire, timeout);
}

}  // namespace tollgate::gateway
