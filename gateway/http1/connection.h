// The HTTP/1.1 protocol adapter: one client connection, reading requests
// one after another (keep-alive), each one exchange of the exchange driver
// (gateway/core/exchange_driver.h), for which the Http1Connection is the downstream:
// it reads the head, writes tollgate's answers and the check endpoint's,
// and forwards (forward.cc: the upstream exchange, and the WebSocket
// tunnel). It gets the connection from the start step
// (gateway/http1/connection_start.h): after the TLS handshake, or after
// the first bytes showed no h2c preface, or at once on a cleartext listener
// that takes only HTTP/1.1. Lives on one worker thread; owned by its
// coroutine (see Serve), or while parked by a completion handler (see
// AwaitRequest).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "gateway/core/admission.h"
#include "gateway/core/exchange.h"
#include "gateway/core/exchange_driver.h"
#include "gateway/core/respond.h"
#include "gateway/http1/exchange_work.h"
#include "gateway/io/net.h"
#include "gateway/io/relay_chunk.h"
#include "gateway/serve/client.h"
#include "gateway/serve/worker.h"

namespace tollgate::gateway {

struct RelayTimeouts;
class Http2UpstreamPool;
class Http2UpstreamStream;

class Http1Connection final : public ClientConnection, private ClientWatch {
 public:
  // Serves `client` until the connection ends. `first`: the first bytes
  // of its first request, when the start step read them (null: none yet).
  static Task<void> Serve(Worker& worker, AcceptedClient client,
                          std::unique_ptr<ExchangeWork> first);

  Http1Connection(Worker& worker, AcceptedClient client, std::unique_ptr<ExchangeWork> first);
  ~Http1Connection();
  Http1Connection(const Http1Connection&) = delete;
  Http1Connection& operator=(const Http1Connection&) = delete;

  void CloseIfIdle() override;
  bool CloseIfIdleKeepAlive() override;
  bool SweepIdle() override;

 private:
  using HeadParser = RequestParser<http::empty_body>;

  // Serves requests until the connection ends or parks; `self` is this
  // connection, owned by the coroutine (its frame, so also when the
  // worker's loop is destroyed with the coroutine suspended) and, while it
  // is parked, by AwaitRequest's completion handler.
  Task<void> Run(std::unique_ptr<Http1Connection> self);
  // A parked connection holds no coroutine frame, as nginx's keep-alive
  // connections hold nothing but their socket and a small object: Run()
  // ends and leaves the connection to a completion handler waiting for
  // readability (AwaitRequest), which owns it, and Resume() reads the next
  // request's first bytes and starts Run() again, or frees the connection
  // when it closed, timed out or drained. A connection parks after its
  // first exchange, and when the worker's sweep finds it idle twice in a
  // row (SweepIdle; also one still waiting for its first request): a busy
  // one parks once, then waits in Run() between its requests.
  static void AwaitRequest(std::unique_ptr<Http1Connection> self);
  static void Resume(std::unique_ptr<Http1Connection> self, ErrorCode ec);
  // Between requests a connection holds no buffer, parser or exchange, as
  // nginx's keep-alive connections hold none: Rest() gives them back, and
  // once the socket is readable ReadRequestStart() takes a buffer and reads
  // the first bytes of the next request into its buffer: true when it read
  // some or failed (`ec`), false when nothing was there (wait again).
  void Rest();
  bool ReadRequestStart(ErrorCode& ec);
  // After a readiness wait that completed with `ec` (in Run, or parked):
  // true when the wait is over (the first bytes read, or `ec` says why
  // not, operation_aborted for a close), false to wait again.
  bool WaitEnded(ErrorCode& ec);
  // The wait is over: no longer idle, parked or closing.
  void EndIdle();

  // --- the downstream of the exchange driver (gateway/core/exchange_driver.h) ---
  friend class ExchangeDriver<Http1Connection>;
  // A reload takes effect between exchanges, never within one.
  const GatewayState& BeginExchange() {
    generation_ = worker_.Current();
    config_ = generation_->state->config.get();
    return *generation_->state;
  }
  Exchange& exchange() { return work_->exchange; }
  Answer& answer() { return work_->answer; }
  Admission& admission() { return work_->admission; }
  ClientWatch& watch() { return *this; }
  ThreadMetrics* metrics() const { return worker_.metrics(); }
  std::string& canonical() { return work_->canonical; }
  std::string_view peer_ip() const { return peer_ip_; }
  const rules::IpAddress& peer_address() const { return peer_address_; }
  const rules::ClientCertificate* client_cert() const { return client_cert_.get(); }
  http::request_header<Fields>& request() { return work_->head->get(); }
  // Run() has read the first bytes, which usually hold the whole header:
  // TakeHead parses them, ReadHead goes to the stream for the rest.
  HeadRead TakeHead(Refusal& refusal);
  Task<HeadRead> ReadHead(Refusal& refusal);
  // How the head's parse ended (`ec`): a refusal, or the client gone.
  HeadRead HeadEnded(const ErrorCode& ec, Refusal& refusal);
  void OnHead(const GatewayState& state, Exchange& ex);
  RequestHeaderCheck CheckHead() {
    return CheckRequestHeader(work_->head->get(), work_->head->chunked());
  }
  void CloseAfterMalformed(Exchange& ex) { ex.close = true; }
  bool IsCheckEndpoint() const { return IsDecisionListener(*config_, listener_); }
  // The parser refuses a declared length beyond max_body_bytes itself.
  bool BodyDeclaredTooLarge() const { return false; }
  // An unread body would be taken for the next request: the connection
  // closes instead.
  void RefusedWithBodyUnread(Exchange& ex) {
    if (!work_->whole && !work_->head->is_done()) CloseWithBodyUnread(ex);
  }
  // A check request's body means nothing; it is not read, so the connection
  // cannot carry another request after it.
  void SkipBody(Exchange& ex) { RefusedWithBodyUnread(ex); }
  bool UpgradeRefused(const rules::RouteConfig& route);
  bool StartReply();
  Task<void> FinishReply();
  Task<void> WriteCheckAllowed();
  void EndExchange(Exchange&) { work_->whole.reset(); }  // a buffered body is not kept
  bool KeepsConnection(const Exchange& ex) const { return !ex.close && !worker_.draining(); }
  // ClientWatch: while admit holds the request, the client leaving (the
  // connection closed) ends the wait; a pipelined request does not.
  Task<Held> Hold(Timer& timer) override;

  // --- forward (forward.cc) ---
  // Forward (the driver runs the upstream's admission between these): the
  // request's head made the upstream's (false: refused, answer() set);
  // whether a body must be read (or a 100 Continue written) before the
  // upstream is asked, and doing it (false: failed, answered); the refusal's
  // effect on the connection; then the exchange itself.
  bool StartForward(const rules::RouteConfig& route);
  bool ReadsBeforeUpstream() const;
  Task<bool> ReadBeforeUpstream();
  // A rule's cost comes from the body: read whole (within max_body_bytes,
  // after a 100 Continue the client asked for) before admit decides, and
  // forwarded with its length; false when it failed (answered). The body
  // read, and the body to forward in its place (an LLM preset's rewrite).
  Task<bool> ReadBodyForCost();
  std::string_view BodyForCost() const {
    return work_->whole ? std::string_view(work_->whole->get().body()) : std::string_view();
  }
  void ReplaceBody(std::string body);
  // The body into work_->whole (the header moves there with it); false when it
  // failed (answered, the connection closes).
  Task<bool> ReadWhole();
  std::string_view UpstreamTarget() {
    // A buffered body took the header with it (Beast's move empties the
    // target it leaves behind).
    return work_->whole ? work_->whole->get().target() : work_->head->get().target();
  }
  void RefusedBeforeUpstream(Exchange& ex);
  Task<void> ExchangeWithUpstream(const rules::RouteConfig& route,
                                  const rules::UpstreamConfig& upstream);
  // The exchange's steps, each a coroutine of its own: every frame stays under the
  // 1 KB that Asio can recycle (a larger one is a malloc and a free per
  // request, and a malloc that large makes glibc consolidate its fast bins
  // first). The steps that face the upstream are gateway/core/upstream_call.h's.
  struct ForwardCall;
  // Connects, sends the buffered request (work_->whole, or the header alone) and
  // reads the response header into work_->res_head; a pooled connection found
  // stale is replaced once by a fresh one when the request is idempotent.
  // False when the exchange failed and was answered.
  Task<bool> SendBuffered(ForwardCall& call, HeadParser& head, Exchange& ex);
  // Connects, relays the request body as it comes, reads the response header.
  Task<bool> SendStreamed(ForwardCall& call, HeadParser& head, Exchange& ex);
  // A request body that failed to arrive (`ec`): the connection closes,
  // after RefuseBody's answer when the client is still there.
  static BodyFailure BodyFailureOf(const ErrorCode& ec);
  Task<void> FailBody(const ErrorCode& ec, Exchange& ex);
  // Answers 502 or 504 for a failed upstream exchange.
  Task<void> FailUpstream(ForwardCall& call, ConnectFailure failure, const ErrorCode& ec,
                          Exchange& ex);
  // The response body read whole (at most kBufferedBody) and sent with the
  // header, or relayed as it comes. True when the exchange completed.
  Task<bool> RespondBuffered(ForwardCall& call, const RelayTimeouts& to_client, Exchange& ex);
  Task<bool> RespondStreamed(ForwardCall& call, const RelayTimeouts& to_client, Exchange& ex);
  // The upstream answered a WebSocket handshake with 101: checks its
  // Sec-WebSocket-Accept for `key` (502 when wrong), sends the 101 on and
  // runs the tunnel (websocket_tunnel.h) until it closes. The upstream
  // connection is never pooled again.
  Task<void> OpenTunnel(ForwardCall& call, const rules::UpstreamConfig& upstream,
                        std::string_view key, Exchange& ex);
  // --- forward to an HTTP/2 upstream (forward_http2.cc) ---
  // The exchange as one stream of `pool`'s: the request header from `head`
  // (or work_->whole, which holds a request read whole with its body), the body
  // sent as it is read, the response back as HTTP/1.1 with the upstream's
  // length or chunked, its trailers in the last chunk.
  Task<void> ForwardHttp2(Http2UpstreamPool& pool, HeadParser& head,
                          const rules::UpstreamConfig& upstream, Exchange& ex);
  // Relays the request body from the client to `up`; false when the client
  // failed (answered); `upstream_ec` when the upstream did.
  Task<bool> SendBodyHttp2(Http2UpstreamStream& up, HeadParser& head, Exchange& ex,
                           ErrorCode& upstream_ec);
  // Relays the response of `up` (its head read) to the client.
  Task<void> RespondHttp2(Http2UpstreamStream& up, const rules::UpstreamConfig& upstream,
                          Exchange& ex);
  Task<ErrorCode> WriteContinue();

  // --- respond ---
  // Writes answer() (with Connection: close when ex.close) and notes it in
  // `ex`. StartReply writes what the socket takes at once and is true when
  // that was all (`ec` says how it went); else WriteWire() the rest. The
  // answer is the exchange's (in its Work), not an argument: a temporary
  // Answer in a co_await expression would stay in the caller's frame, one
  // per call site.
  bool StartReply(Exchange& ex, ErrorCode& ec);
  Task<void> Reply(Exchange& ex);
  // Writes the wire (a whole message, see AppendWireHeader) to `stream`, within
  // `timeout`.
  Task<ErrorCode> WriteWire(AnyStream& stream, std::chrono::steady_clock::duration timeout);
  // The fast path of WriteWire(), with no coroutine frame, operation or
  // handler: a stream (plain, or TLS: TlsStream::TryWrite) whose socket
  // takes all of the wire at once.
  // True when done (`ec` says how it went); false when bytes remain (those
  // written are gone from the wire): WriteWire() the rest. `last`: the wire is
  // the last the connection sends (the exchange closes it); to the client
  // over TLS it is then encrypted now and sent by Shutdown() with the
  // close_notify and any session tickets still owed, in one send
  // (WriteLastOverTls).
  bool TryWriteWire(AnyStream& stream, ErrorCode& ec, bool last = false);
  bool WriteLastOverTls(TlsStream& tls);
  // TLS 1.3 session tickets: OpenSSL's own (SSL_set_num_tickets 0) would
  // go out alone at the end of the handshake, a send and a wakeup of the
  // client of their own. They are issued here instead, to go out with the
  // next record written (or before the next read).
  void IssueTickets();

  Task<void> Shutdown();
  // The exchange ends the connection with the request body (or part of
  // it) unread: Shutdown() then drops what the client still sends.
  void CloseWithBodyUnread(Exchange& ex);
  std::chrono::milliseconds Budget(std::int64_t op_ms, const Exchange& ex) const;
  // The exchange's deadline (timeouts.request from its start) on
  // store::LoopNow()'s scale, which stream deadlines use.
  std::chrono::steady_clock::time_point SteadyDeadline(const Exchange& ex) const;
  char* RelayBuffer() { return relay_buffer_.Get(); }

  Worker& worker_;
  // The configuration of the current exchange (refreshed before each one).
  std::shared_ptr<Generation> generation_;
  const rules::Config* config_;
  ClientCount count_;
  AnyStream stream_;
  std::size_t listener_;
  std::string peer_ip_;
  rules::IpAddress peer_address_;
  // The client certificate the TLS handshake verified; null: none.
  std::unique_ptr<const rules::ClientCertificate> client_cert_;
  RelayChunk relay_buffer_;  // a streamed body's, while it passes
  // The current exchange's storage (gateway/http1/exchange_work.h): null
  // while the connection is idle. Members rather than coroutine locals:
  // frames above 1 KB cost a malloc and a free per request (Asio recycles
  // smaller ones).
  std::unique_ptr<ExchangeWork> work_;
  bool websocket_ = false;  // the current request is a WebSocket handshake
  bool expects_continue_ = false;  // the current request asked for 100 Continue
  bool idle_ = false;              // waiting for the next request
  bool idle_swept_ = false;        // and a sweep found it so
  bool park_ = false;              // SweepIdle cancelled the wait: Run() parks
  bool parked_ = false;            // waiting in AwaitRequest's handler
  bool parked_once_ = false;       // parked after its first exchange
  bool served_ = false;  // an exchange has completed
  bool closing_ = false;  // CloseIfIdle has cancelled its wait
  bool body_unread_ = false;  // CloseWithBodyUnread() was called
  int tickets_owed_ = 0;      // TLS 1.3 session tickets not issued yet
  // WriteLastOverTls() left the last response in TlsStream's output, for
  // Shutdown() to send.
  bool last_in_tls_ = false;
};

}  // namespace tollgate::gateway
