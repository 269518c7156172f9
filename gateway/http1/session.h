// One client connection: reads requests one after another (keep-alive) and
// passes each through the phases route -> forward -> respond -> log.
// Lives on one worker thread; owned by its coroutine (see Worker).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "gateway/io/net.h"
#include "gateway/core/ratelimit.h"
#include "gateway/worker.h"

namespace tollgate::gateway {

struct Exchange;
struct RelayTimeouts;

class Session {
 public:
  Session(Worker& worker, AnyStream stream, std::size_t listener, const tcp::endpoint& peer);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  Task<void> Run();
  // Drain: a session waiting for its next request is closed now.
  void CloseIfIdle();
  // Likewise, but only one that has served a request (an idle keep-alive
  // connection, not a new one yet to send its first); true when closed.
  bool CloseIfIdleKeepAlive();

 private:
  using HeadParser = RequestParser<http::empty_body>;

  Task<bool> ServeOne();
  // Puts the request's path (query kept) and `host` (the Host field) in
  // their canonical forms (rules/normalize.h) in `req`, which routes, rules,
  // the access log and the upstream then see. A problem (answered 400) when
  // either cannot be. Empty Host (HTTP/1.0) stays empty; "*" stays.
  std::string_view Canonicalize(http::request_header<Fields>& req, std::string_view& host);
  Task<void> Forward(HeadParser& head, const rules::RouteConfig& route, Exchange& ex,
                     const LimitOutcome& limits);
  // Forward's steps, each a coroutine of its own: every frame stays under the
  // 1 KB that Asio can recycle (Forward's was 3.4 KB: never recycled, and a
  // malloc that large makes glibc consolidate its fast bins first).
  struct UpstreamCall;
  // Connects, sends the buffered request (whole_, or the header alone) and
  // reads the response header into res_head_; a pooled connection found
  // stale is replaced once by a fresh one when the request is idempotent.
  // False when the exchange failed and was answered.
  Task<bool> SendBuffered(UpstreamCall& call, HeadParser& head, Exchange& ex);
  // Connects, relays the request body as it comes, reads the response header.
  Task<bool> SendStreamed(UpstreamCall& call, HeadParser& head, Exchange& ex);
  // The response header into res_head_, past interim 1xx responses.
  Task<std::pair<ErrorCode, std::size_t>> ReadResponseHead(UpstreamCall& call, Exchange& ex);
  // Answers 502 or 504 for a failed upstream exchange.
  Task<void> FailUpstream(UpstreamCall& call, ConnectFailure failure, const ErrorCode& ec,
                          Exchange& ex);
  // The response body read whole (at most kBufferedBody) and sent with the
  // header, or relayed as it comes. True when the exchange completed.
  Task<bool> RespondBuffered(UpstreamCall& call, const RelayTimeouts& to_client, Exchange& ex);
  Task<bool> RespondStreamed(UpstreamCall& call, const RelayTimeouts& to_client, Exchange& ex);
  // The upstream answered a WebSocket handshake with 101: checks its
  // Sec-WebSocket-Accept for `key` (502 when wrong), sends the 101 on and
  // runs the tunnel (websocket_tunnel.h) until it closes. The upstream
  // connection is never pooled again.
  Task<void> OpenTunnel(UpstreamCall& call, std::string_view key, Exchange& ex);
  // identify -> match rules -> decide, into outcome_; answers limited
  // requests itself. True when the request goes on to the upstream.
  // `host`: the request's Host field.
  Task<bool> Limit(HeadParser& head, const rules::RouteConfig& route, std::string_view host,
                   Exchange& ex);
  // Shaping (leaky_bucket without nodelay): holds the request delay_ms.
  Task<void> WaitShaped(std::int64_t delay_ms);
  Task<void> ReplyError(Exchange& ex, http::status status, std::string_view code,
                        std::string_view message, std::int64_t retry_after_s = 0);
  LimitContext MakeLimitContext(const GatewayState& state) const;
  Task<ErrorCode> WriteContinue();
  // Holds the request while the limits learned from `upstream` say it would
  // be refused (up to learn_max_delay); false once it was answered 429.
  Task<bool> WaitForUpstreamLimit(const rules::UpstreamConfig& upstream, const std::string& bucket,
                                  Exchange& ex);
  // Runs `call` on this worker's coordinator and awaits its answer (with
  // Redis, on_error answers for it when Redis cannot: store/failover_store.h).
  using CoordinatorCall = std::function<void(store::Coordinator&, store::CountSink&)>;
  Task<store::CountResult> Coordinate(CoordinatorCall call);
  enum class Place { kAdmitted, kRefused, kStoreDown };
  // A place for each concurrency rule of the request (max_inflight), into
  // outcome.inflight; a request beyond a rule's limit waits for one up to
  // its max_delay. kRefused: `refused` says by which rule.
  Task<Place> AcquirePlaces(const LimitContext& context, LimitOutcome& outcome,
                            const rules::RuleConfig*& refused);
  // A place towards `upstream` (max_connections), waiting up to its
  // max_connections_delay; nullopt when none came.
  Task<std::optional<store::InflightGuard>> AcquireUpstreamPlace(
      const rules::UpstreamConfig& upstream);
  // A request waiting for a place (max_inflight, max_connections).
  struct PlaceWait;
  // Sleeps before the next try for a place: 1 ms, doubling up to 32 ms,
  // never past the wait's deadline; from the first call on the request
  // holds a place in the waiting room. False when it may not wait (no
  // delay configured, waiting room full) or the deadline has passed.
  Task<bool> WaitForPlace(PlaceWait& wait);
  enum class Turn { kReady, kRejected, kClientGone };
  // Holds a request limited by delay rules until they allow it. kRejected:
  // it cannot be served within max_delay or the waiting room is full
  // (outcome.shown says by which rule); kClientGone: the client left.
  Task<Turn> WaitForTurn(LimitOutcome& outcome, Exchange& ex);
  // wire_ = the 429 answer for `rule`'s decision.
  void PrepareReject(const rules::RuleConfig& rule, const algorithms::Decision& decision,
                     Exchange& ex);
  // For streamed responses: "Name: value\r\n" lines into Beast's fields.
  static void AddHeaderLines(std::string_view lines, Fields& fields);
  // Writes wire_ (a whole message, see AppendWireHeader) to `stream`, within
  // `timeout`.
  Task<ErrorCode> WriteWire(AnyStream& stream, std::chrono::steady_clock::duration timeout);
  // The fast path of WriteWire(), with no coroutine frame, operation or
  // handler: a plain TCP stream whose socket takes all of wire_ at once.
  // True when done (`ec` says how it went); false when bytes remain (those
  // written are gone from wire_): WriteWire() the rest.
  bool TryWriteWire(AnyStream& stream, ErrorCode& ec);
  Task<void> Shutdown();
  void Log(const Exchange& ex);
  std::chrono::milliseconds Budget(std::int64_t op_ms, const Exchange& ex) const;
  // The exchange's deadline (timeouts.request from its start) on
  // store::LoopNow()'s scale, which stream deadlines use.
  std::chrono::steady_clock::time_point SteadyDeadline(const Exchange& ex) const;
  char* RelayBuffer();

  Worker& worker_;
  // The configuration of the current exchange (refreshed before each one).
  std::shared_ptr<Generation> generation_;
  const rules::Config* config_;
  AnyStream stream_;
  beast::flat_buffer buffer_;
  std::size_t listener_;
  std::string peer_ip_;
  rules::IpAddress peer_address_;
  rules::Evaluation evaluation_;  // reused between requests
  std::vector<const rules::RuleHit*> hits_;
  DecisionBatch batch_;
  std::unique_ptr<char[]> relay_buffer_;
  // The current exchange, its request header and its rate-limit outcome:
  // members rather than coroutine locals (frames above 1 KB cost a malloc
  // and a free per request; Asio recycles smaller ones), reset per exchange.
  std::unique_ptr<Exchange> exchange_;
  LimitOutcome outcome_;  // also holds concurrency places until the exchange ends
  std::optional<HeadParser> head_;
  std::optional<RequestParser<http::string_body>> whole_;  // a buffered request with its body
  std::optional<ResponseParser<http::empty_body>> res_head_;
  std::string canonical_;  // Canonicalize()'s output, reused
  std::string wire_;       // reused for every buffered message this session sends
  std::string extra_headers_;  // rate-limit header lines for the current response
  bool websocket_ = false;  // the current request is a WebSocket handshake
  bool idle_ = true;
  bool served_ = false;  // an exchange has completed
  bool closing_ = false;  // CloseIfIdle has cancelled its wait
  int metric_listener_ = 0;
};

Task<void> RunSession(std::unique_ptr<Session> session);

}  // namespace tollgate::gateway
