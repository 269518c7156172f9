#include "gateway/http1/session.h"

#include <sys/socket.h>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/read_size.hpp>
#include <cerrno>
#include <limits>
#include <optional>

#include "gateway/http1/http_util.h"
#include "gateway/io/relay.h"
#include "gateway/core/upstream_limits.h"
#include "gateway/http1/websocket_tunnel.h"
#include "rules/normalize.h"
#include "store/loop_time.h"

namespace tollgate::gateway {

// What one request/response exchange did, for the access log: every field
// but the strings (Exchange::Reset assigns a fresh one).
struct ExchangeFacts {
  std::int64_t start_ms = 0;
  std::int64_t deadline_ms = 0;
  unsigned version = 11;
  unsigned status = 0;
  std::uint64_t bytes_in = 0;
  std::uint64_t bytes_out = 0;
  std::int64_t upstream_start_ms = -1;
  std::int64_t upstream_end_ms = -1;
  // Metrics: real time (sub-millisecond), whatever Clock the gateway runs on.
  std::chrono::steady_clock::time_point started;
  std::chrono::steady_clock::time_point upstream_started;
  std::chrono::steady_clock::time_point upstream_ended;
  std::int64_t retry_after_ms = -1;  // announced to a limited client
  int route_metric = -1;             // metric id of the route; -1: no route matched
  int upstream_metric = -1;          // metric id of the upstream asked; -1: none
  // Into the exchange's configuration and upstream pool, which the session
  // holds (generation_) until the exchange is logged.
  std::string_view route;
  std::string_view upstream;
  bool close = false;  // the connection ends after this exchange
};

struct Exchange : ExchangeFacts {
  std::string method;
  std::string target;
  std::string user_agent;
  std::string referer;
  std::string limit_key;  // kind of the shown rule's key
  std::string error;
  std::string ratelimit;

  // A fresh exchange whose strings keep their storage (assigning a new
  // Exchange moved seven strings: ~250 instructions per request).
  void Reset() {
    static_cast<ExchangeFacts&>(*this) = ExchangeFacts();
    for (std::string* s :
         {&method, &target, &user_agent, &referer, &limit_key, &error, &ratelimit}) {
      s->clear();
    }
  }
};

namespace {

// The upstream has answered in full (or failed): both scales at one read.
void MarkUpstreamEnd(const store::Clock& clock, Exchange& ex) {
  const store::Instant end = clock.Now();
  ex.upstream_end_ms = end.ms;
  ex.upstream_ended = end.steady;
}

// Bodies up to this size are read whole and written with their header in one
// write; larger or chunked bodies are streamed through the relay buffer.
constexpr std::uint64_t kBufferedBody = 64 * 1024;
constexpr std::uint32_t kUpstreamHeaderLimit = 64 * 1024;
// Waiting-room keys of requests waiting for an upstream place; rule keys
// start with the rule's name, never with the separator.
constexpr std::string_view kUpstreamWaitingPrefix = "\x1fupstream\x1f";

bool IsStaleConnectionError(const ErrorCode& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe;
}

bool IsClientGone(const ErrorCode& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::operation_aborted ||
         ec == ssl::error::stream_truncated;
}

// How far ParseBuffered goes: kHeader stops after the header (a header-only
// parser would refuse the body).
enum class ParseUntil { kMessage, kHeader };

// Feeds `parser` what `buffer` already holds. True when that ended the
// message (or its header), or failed it (`ec`); false when the rest is still
// to be read. Beast's async_read would find the same bytes, but then posts
// its completion: the exchange would wait behind every queued handler for no
// I/O.

template <typename Parser>
bool ParseBuffered(beast::flat_buffer& buffer, Parser& parser, ErrorCode& ec,
                   ParseUntil until = ParseUntil::kMessage) {
  const auto done = [&] {
    return until == ParseUntil::kHeader ? parser.is_header_done() : parser.is_done();
  };
  while (!done() && buffer.size() > 0) {
    const std::size_t used = parser.put(buffer.data(), ec);
    buffer.consume(used);
    if (ec == http::error::need_more) {
      ec = {};
      return false;
    }
    if (ec) return true;
    if (used == 0) return false;
  }
  return done();
}

// Counts a request in tollgate_delayed_requests while it is held.
class DelayedGauge {
 public:
  explicit DelayedGauge(ThreadMetrics* metrics) : metrics_(metrics) {
    if (metrics_ != nullptr) metrics_->AddDelayed(1);
  }
  ~DelayedGauge() {
    if (metrics_ != nullptr) metrics_->AddDelayed(-1);
  }
  DelayedGauge(const DelayedGauge&) = delete;
  DelayedGauge& operator=(const DelayedGauge&) = delete;

 private:
  ThreadMetrics* metrics_;
};

template <typename Fn>
auto Visit(AnyStream& stream, Fn&& fn) {
  return std::visit(std::forward<Fn>(fn), stream);
}

}  // namespace

Session::Session(Worker& worker, AnyStream stream, std::size_t listener, const tcp::endpoint& peer)
    : worker_(worker),
      generation_(worker.Current()),
      config_(generation_->state->config.get()),
      stream_(std::move(stream)),
      buffer_(static_cast<std::size_t>(config_->limits.max_header_bytes) + kRelayChunk),
      listener_(listener),
      peer_ip_(peer.address().to_string()),
      peer_address_(rules::IpAddress::Parse(peer_ip_).value_or(rules::IpAddress{})),
      batch_(worker.io().get_executor()),
      exchange_(std::make_unique<Exchange>()) {
  // Beast sizes each read by the buffer's spare capacity (at least 512 bytes):
  // without room, a streamed body would arrive in tiny reads.
  buffer_.reserve(kRelayChunk);
  worker_.Register(this);
  if (ThreadMetrics* metrics = worker_.metrics()) {
    metric_listener_ = generation_->state->listener_ids[listener_];
    metrics->AddConnections(metric_listener_, 1);
  }
}

Session::~Session() {
  if (ThreadMetrics* metrics = worker_.metrics()) metrics->AddConnections(metric_listener_, -1);
  worker_.Unregister(this);
}

Task<void> RunSession(std::unique_ptr<Session> session) { co_await session->Run(); }

void Session::CloseIfIdle() {
  if (idle_ && !closing_) {
    closing_ = true;
    Lowest(stream_).cancel();
  }
}

bool Session::CloseIfIdleKeepAlive() {
  if (!served_ || !idle_ || closing_) return false;
  CloseIfIdle();
  return true;
}

std::chrono::milliseconds Session::Budget(std::int64_t op_ms, const Exchange& ex) const {
  const std::int64_t left = ex.deadline_ms - generation_->state->clock->NowMs();
  return Ms(std::max<std::int64_t>(1, std::min(op_ms, left)));
}

std::chrono::steady_clock::time_point Session::SteadyDeadline(const Exchange& ex) const {
  return store::LoopNow() + Ms(ex.deadline_ms - generation_->state->clock->NowMs());
}

char* Session::RelayBuffer() {
  if (!relay_buffer_) relay_buffer_ = std::make_unique<char[]>(kRelayChunk);
  return relay_buffer_.get();
}

Task<void> Session::Run() {
  // config_ changes with reloads between exchanges (and the old one may be
  // gone): read it afresh each time, never keep a reference into it here.
  if (auto* tls = std::get_if<TlsStream>(&stream_)) {
    Lowest(stream_).expires_after(Ms(config_->timeouts.client_header_ms));
    auto [ec] = co_await tls->async_handshake(ssl::stream_base::server, kUseTuple);
    if (ec) co_return;
  }
  bool first = true;
  for (;;) {
    if (worker_.draining()) break;
    if (buffer_.size() == 0) {
      // Waiting for the first byte of the next request is idleness, with its
      // own (longer) deadline; the header then has client_header to arrive.
      idle_ = true;
      Lowest(stream_).expires_after(
          Ms(first ? config_->timeouts.client_header_ms : config_->timeouts.client_idle_ms));
      auto [ec, n] = co_await Visit(stream_, [&](auto& s) {
        return s.async_read_some(buffer_.prepare(kRelayChunk), kUseTuple);
      });
      idle_ = false;
      closing_ = false;
      if (ec) co_return;  // closed, idle timeout or drain: nothing to answer
      buffer_.commit(n);
    }
    first = false;
    if (!co_await ServeOne()) break;
    served_ = true;
  }
  co_await Shutdown();
}

Task<void> Session::Shutdown() {
  Lowest(stream_).expires_after(std::chrono::seconds(1));
  if (auto* tls = std::get_if<TlsStream>(&stream_)) {
    co_await tls->async_shutdown(kUseTuple);
  }
  ErrorCode ec;
  Lowest(stream_).socket().shutdown(tcp::socket::shutdown_send, ec);
}

Task<bool> Session::ServeOne() {
  // A reload takes effect between exchanges, never within one.
  generation_ = worker_.Current();
  config_ = generation_->state->config.get();
  const store::Clock& clock = *generation_->state->clock;
  Exchange& ex = *exchange_;
  ex.Reset();
  const store::Instant start = clock.Now();
  ex.start_ms = start.ms;
  ex.started = start.steady;
  ex.deadline_ms = ex.start_ms + config_->timeouts.request_ms;

  HeadParser& head = head_.emplace();
  head.header_limit(static_cast<std::uint32_t>(config_->limits.max_header_bytes));
  head.body_limit(static_cast<std::uint64_t>(config_->limits.max_body_bytes));
  // Run() has read the first bytes, which usually hold the whole header:
  // parse them here, and go to the stream only for the rest.
  ErrorCode ec;
  buffer_.consume(head.put(buffer_.data(), ec));
  if (ec == http::error::need_more) {
    Lowest(stream_).expires_after(Ms(config_->timeouts.client_header_ms));
    auto [read_ec, n] = co_await Visit(
        stream_, [&](auto& s) { return http::async_read_header(s, buffer_, head, kUseTuple); });
    ec = read_ec;
  }
  if (ec) {
    ex.close = true;
    if (IsClientGone(ec)) co_return false;
    if (ec == http::error::header_limit) {
      co_await ReplyError(ex, http::status::request_header_fields_too_large, "header_too_large",
                          "request header exceeds the limit");
    } else if (ec == http::error::body_limit) {
      co_await ReplyError(ex, http::status::payload_too_large, "body_too_large",
                          "request body exceeds the limit");
    } else if (ec == beast::error::timeout) {
      co_await ReplyError(ex, http::status::request_timeout, "request_timeout",
                          "request header not received in time");
    } else {
      co_await ReplyError(ex, http::status::bad_request, "bad_request", "malformed request");
    }
    Log(ex);
    co_return false;
  }

  const auto& req = head.get();
  if (const AccessLog* log = generation_->state->access_log; log != nullptr && log->enabled()) {
    ex.method = req.method_string();
    ex.target = req.target();
    ex.user_agent = req[http::field::user_agent];
    ex.referer = req[http::field::referer];
  }
  ex.version = req.version();
  ex.close = !head.keep_alive();  // the parser's flags: no lookup of Connection
  const RequestHeaderCheck check = CheckRequestHeader(req, head.chunked());
  if (!check.problem.empty()) {
    ex.close = true;
    co_await ReplyError(ex, check.status,
                        check.status == http::status::bad_request ? "bad_request" : "not_implemented",
                        check.problem);
    Log(ex);
    co_return false;
  }
  std::string_view host = check.host;
  if (!check.origin_form.empty()) {
    // From here on, and to the upstream, as if sent in origin-form.
    head.get().set(http::field::host, check.authority);
    head.get().target(check.origin_form);
    host = head.get()[http::field::host];
  }
  if (const std::string_view problem = Canonicalize(head.get(), host); !problem.empty()) {
    ex.close = true;
    co_await ReplyError(ex, http::status::bad_request, "bad_request", problem);
    Log(ex);
    co_return false;
  }
  if (!ex.target.empty()) ex.target = req.target();  // the access log shows what rules saw

  const rules::RouteConfig* route = generation_->state->routes->Match(host, req.target());
  if (route == nullptr) {
    // The unread body would be taken for the next request: close instead.
    if (!head.is_done()) ex.close = true;
    co_await ReplyError(ex, http::status::not_found, "no_route", "no route matches this request");
  } else {
    ex.route = route->name;
    if (worker_.metrics() != nullptr) {
      ex.route_metric = generation_->state->route_ids[route - config_->routes.data()];
    }
    // (The parser's flag first: no field lookup for other requests.)
    websocket_ = head.upgrade() && IsWebSocketHandshake(req, !head.is_done());
    if (websocket_ && !route->websocket) {
      co_await ReplyError(ex, http::status::bad_request, "websocket_disabled",
                          "WebSocket is not enabled on this route");
    } else {
      const bool forward = co_await Limit(head, *route, host, ex);
      if (forward) co_await Forward(head, *route, ex, outcome_);
    }
  }
  Log(ex);
  whole_.reset();             // a buffered body is not kept between exchanges
  outcome_ = LimitOutcome();  // places of concurrency rules are given back here
  co_return !ex.close && !worker_.draining();
}

std::string_view Session::Canonicalize(http::request_header<Fields>& req, std::string_view& host) {
  const std::string_view target = req.target();
  if (target.front() == '/') {
    const std::size_t query = target.find('?');
    const rules::PathStatus path =
        rules::NormalizePath(target.substr(0, query), canonical_);
    switch (path) {
      case rules::PathStatus::kUnchanged:
        break;
      case rules::PathStatus::kNormalized:
        if (query != std::string_view::npos) canonical_.append(target.substr(query));
        req.target(canonical_);
        break;
      case rules::PathStatus::kBadEncoding:
        return "the path has a malformed percent-encoding";
      case rules::PathStatus::kNulByte:
        return "the path holds a NUL byte";
      case rules::PathStatus::kAboveRoot:
        return "the path climbs above the root";
      case rules::PathStatus::kNotAbsolute:
        return "the path must start with /";
    }
  }
  if (host.empty()) return {};  // HTTP/1.0 without Host
  switch (rules::NormalizeHost(host, canonical_)) {
    case rules::HostStatus::kUnchanged:
      break;
    case rules::HostStatus::kNormalized:
      req.set(http::field::host, canonical_);
      host = req[http::field::host];
      break;
    case rules::HostStatus::kInvalid:
      return "the Host field is not a valid host";
  }
  return {};
}

Task<bool> Session::Limit(HeadParser& head, const rules::RouteConfig& route, std::string_view host,
                          Exchange& ex) {
  const GatewayState& state = (*generation_->state);
  auto& req = head.get();
  const FieldsLookup lookup(req);
  const std::string_view target = req.target();
  const rules::RequestFacts facts{req.method_string(),
                                  target.substr(0, target.find('?')),
                                  host,
                                  route.name,
                                  peer_address_,
                                  &lookup};
  const rules::Identity identity = state.identity->Resolve(facts);
  const LimitContext context = MakeLimitContext(state);
  LimitOutcome& outcome = outcome_;
  const auto asked =
      context.metrics != nullptr ? store::LoopNow() : std::chrono::steady_clock::time_point();
  if (!StartLimits(context, facts, identity, evaluation_, hits_, batch_, outcome)) {
    if (!batch_.done()) co_await batch_.Wait();
    if (context.metrics != nullptr) {
      context.metrics->RecordStore(context.store_kind,
                                   std::chrono::duration<double>(store::LoopNow() - asked).count());
    }
    outcome = FinishLimits(context, hits_, batch_);
  }
  ex.ratelimit = outcome.log;
  if (outcome.shown != nullptr && generation_->state->access_log->enabled()) {
    ex.limit_key = outcome.shown->KeyKind();
  }
  // Identity headers count only from trusted proxies; nobody else may pass
  // them (in any spelling) or a client address on to the upstream either.
  ScrubIdentityFields(req, state.identity->config(), identity);
  // An unread body would be taken for the next request.
  if (outcome.verdict != Verdict::kForward && outcome.verdict != Verdict::kDelay &&
      !head.is_done()) {
    ex.close = true;
  }
  if (outcome.verdict == Verdict::kUnauthorized) {
    co_await ReplyError(ex, http::status::unauthorized, "unauthorized",
                        "the bearer token is not valid");
    co_return false;
  }
  if (outcome.verdict == Verdict::kStoreUnavailable) {
    // on_error = "deny": fail closed while the store cannot decide.
    co_await ReplyError(ex, http::status::service_unavailable, "store_unavailable",
                        "the rate-limit store is unavailable", 1);
    co_return false;
  }
  if (outcome.verdict == Verdict::kDelay) {
    // (GCC 12 miscompiles co_await inside && and ?: : keep it a statement.)
    const DelayedGauge gauge(worker_.metrics());
    const Turn turn = co_await WaitForTurn(outcome, ex);
    if (turn == Turn::kClientGone) co_return false;
    if (turn == Turn::kRejected) outcome.verdict = Verdict::kReject;
  }
  if (outcome.verdict == Verdict::kReject) {
    PrepareReject(*outcome.shown, outcome.shown_decision, ex);
    ErrorCode ec;
    if (!TryWriteWire(stream_, ec)) {
      ec = co_await WriteWire(stream_, Ms(config_->timeouts.client_body_ms));
    }
    if (ec) ex.close = true;
    co_return false;
  }
  if (outcome.delay_ms > 0) co_await WaitShaped(outcome.delay_ms);
  if (!evaluation_.inflight.empty()) {
    // Places are taken after any wait: a held request does not occupy one.
    const rules::RuleConfig* refused = nullptr;
    const Place place = co_await AcquirePlaces(context, outcome, refused);
    ex.ratelimit = outcome.log;
    if (place != Place::kAdmitted && !head.is_done()) ex.close = true;
    if (place == Place::kStoreDown) {
      co_await ReplyError(ex, http::status::service_unavailable, "store_unavailable",
                          "the rate-limit store is unavailable", 1);
      co_return false;
    }
    if (place == Place::kRefused) {
      co_await ReplyError(ex, static_cast<http::status>(refused->status), "too_many_inflight",
                          "too many requests of this client are in flight", 1);
      co_return false;
    }
  }
  co_return true;
}

Task<void> Session::WaitShaped(std::int64_t delay_ms) {
  // A timer, not a thread: the worker serves others meanwhile.
  const Executor executor = co_await asio::this_coro::executor;
  Timer turn(executor, Ms(delay_ms));
  const DelayedGauge gauge(worker_.metrics());
  co_await turn.async_wait(kUseTuple);
}

Task<store::CountResult> Session::Coordinate(CoordinatorCall call) {
  const Executor executor = co_await asio::this_coro::executor;
  CountCall answer(executor);
  call(worker_.coordinator(), answer);
  co_return co_await answer.Wait();
}

struct Session::PlaceWait {
  std::string key;  // in the waiting room
  std::size_t max_waiting = 0;
  std::int64_t delay_ms = 0;  // 0: refused at once
  std::int64_t deadline_ms = 0;
  int attempt = 0;
  std::optional<WaitingRoom::Ticket> ticket = std::nullopt;
  std::optional<DelayedGauge> gauge = std::nullopt;
};

Task<bool> Session::WaitForPlace(PlaceWait& wait) {
  const GatewayState& state = *generation_->state;
  if (!wait.ticket) {
    if (wait.delay_ms <= 0) co_return false;
    std::size_t before = 0;
    wait.ticket = state.waiting_room->Enter(wait.key, wait.max_waiting, before);
    if (!wait.ticket) co_return false;
    wait.gauge.emplace(worker_.metrics());
  }
  const std::int64_t left = wait.deadline_ms - state.clock->NowMs();
  if (left <= 0) co_return false;
  const Executor executor = co_await asio::this_coro::executor;
  Timer timer(executor,
              Ms(std::min<std::int64_t>(left, std::int64_t{1} << std::min(wait.attempt, 5))));
  ++wait.attempt;
  co_await timer.async_wait(kUseTuple);
  co_return true;
}

Task<Session::Place> Session::AcquirePlaces(const LimitContext& context, LimitOutcome& outcome,
                                            const rules::RuleConfig*& refused) {
  const GatewayState& state = *generation_->state;
  for (const rules::RuleHit& hit : evaluation_.inflight) {
    const rules::RuleConfig& rule = *hit.rule;
    PlaceWait wait{hit.key, static_cast<std::size_t>(rule.max_waiting), rule.max_delay_ms,
                   state.clock->NowMs() + rule.max_delay_ms};
    for (;;) {
      store::InflightGuard place;
      const store::CountResult got =
          co_await Coordinate([&](store::Coordinator& c, store::CountSink& sink) {
            c.AcquirePlace(hit.key, rule.max_inflight, context.store_now_ms, place, sink);
          });
      if (got.status != store::StoreStatus::kOk) {
        if (got.source == store::ResultSource::kPolicyDenied) {
          outcome.inflight.clear();
          co_return Place::kStoreDown;
        }
        NoteInflight(context, hit, true, outcome);  // on_error = "allow": no place to count
        break;
      }
      if (got.value == 1) {
        NoteInflight(context, hit, true, outcome);
        outcome.inflight.push_back(std::move(place));
        break;
      }
      const bool again = co_await WaitForPlace(wait);
      if (!again) {
        NoteInflight(context, hit, false, outcome);
        outcome.inflight.clear();  // the places already taken go back at once
        refused = &rule;
        co_return Place::kRefused;
      }
    }
  }
  co_return Place::kAdmitted;
}

Task<std::optional<store::InflightGuard>> Session::AcquireUpstreamPlace(
    const rules::UpstreamConfig& upstream) {
  const GatewayState& state = *generation_->state;
  // Bounded by the process's waiting room only: an upstream has one key.
  PlaceWait wait{std::string(kUpstreamWaitingPrefix) + upstream.name,
                 static_cast<std::size_t>(config_->limits.max_waiting),
                 upstream.max_connections_delay_ms,
                 state.clock->NowMs() + upstream.max_connections_delay_ms};
  for (;;) {
    std::optional<store::InflightGuard> place =
        state.inflight_upstreams->TryAcquire(upstream.name, upstream.max_connections);
    if (place) co_return place;
    const bool again = co_await WaitForPlace(wait);
    if (!again) co_return std::nullopt;
  }
}

void Session::PrepareReject(const rules::RuleConfig& rule, const algorithms::Decision& decision,
                            Exchange& ex) {
  ex.retry_after_ms = decision.retry_after_ms;
  wire_.clear();
  ex.status = rule.status;
  ex.bytes_out = AppendLimitedResponse(rule, decision, !ex.close, wire_);
}

Task<Session::Turn> Session::WaitForTurn(LimitOutcome& outcome, Exchange& ex) {
  using namespace asio::experimental::awaitable_operators;
  const GatewayState& state = *generation_->state;
  const store::Clock& clock = *state.clock;
  const std::int64_t start = clock.NowMs();
  std::int64_t deadline = std::numeric_limits<std::int64_t>::max();
  std::int64_t wait = 0;
  // Places held until this function returns: in this process's waiting room
  // (its bound) and in the key's waiting line (shared with other gateways
  // on Redis: it spreads their waiting requests over later windows too).
  std::vector<WaitingRoom::Ticket> tickets;
  std::vector<store::InflightGuard> lines(outcome.delayed.size());
  for (std::size_t i = 0; i < outcome.delayed.size(); ++i) {
    const DelayedHit& d = outcome.delayed[i];
    const rules::RuleConfig& rule = *d.hit->rule;
    deadline = std::min(deadline, start + rule.max_delay_ms);
    std::size_t local_queued = 0;
    std::optional<WaitingRoom::Ticket> ticket = state.waiting_room->Enter(
        d.hit->key, static_cast<std::size_t>(rule.max_waiting), local_queued);
    if (!ticket) {
      ex.error = "waiting_room_full";
      outcome.shown = &rule;
      outcome.shown_decision = d.decision;
      co_return Turn::kRejected;
    }
    tickets.push_back(std::move(*ticket));
    const store::CountResult queued =
        co_await Coordinate([&](store::Coordinator& c, store::CountSink& sink) {
          c.EnterQueue(d.hit->key, rule.max_delay_ms + 1000, lines[i], sink);
        });
    // Without an answer, this process's own count is the estimate.
    const std::size_t before =
        queued.status == store::StoreStatus::kOk
            ? static_cast<std::size_t>(std::max<std::int64_t>(0, queued.value))
            : local_queued;
    wait = std::max(wait, DelayFor(rule, d.decision, before, start));
  }
  // (GCC 12 also mishandles co_await inside a constructor's arguments.)
  const Executor executor = co_await asio::this_coro::executor;
  Timer timer(executor);
  for (;;) {
    if (clock.NowMs() + wait > deadline) {
      outcome.shown = outcome.delayed.front().hit->rule;
      outcome.shown_decision = outcome.delayed.front().decision;
      co_return Turn::kRejected;
    }
    const std::int64_t slept_from = clock.NowMs();
    timer.expires_after(Ms(wait));
    // Waiting also watches the connection: a client that leaves gives its
    // place back at once.
    auto first = co_await (timer.async_wait(kUseTuple) ||
                           Lowest(stream_).socket().async_wait(tcp::socket::wait_read, kUseTuple));
    if (first.index() == 1) {
      char byte;
      const ssize_t n =
          ::recv(Lowest(stream_).socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
        ex.close = true;
        ex.error = "client_gone";
        co_return Turn::kClientGone;
      }
      // Data (a pipelined request): it waits in the socket; keep our turn.
      timer.expires_after(Ms(std::max<std::int64_t>(0, wait - (clock.NowMs() - slept_from))));
      co_await timer.async_wait(kUseTuple);
    }
    bool allowed = true;
    wait = 0;
    // Only the delaying rules are decided again: the others already counted.
    hits_.clear();
    for (const DelayedHit& d : outcome.delayed) hits_.push_back(d.hit);
    const LimitContext context = MakeLimitContext(state);
    batch_.Start(context.store, hits_, context.store_now_ms);
    if (!batch_.done()) co_await batch_.Wait();
    for (std::size_t i = 0; i < outcome.delayed.size(); ++i) {
      DelayedHit& d = outcome.delayed[i];
      // The store's decision, or what on_error answered for it.
      d.decision = batch_.result(i).decision;
      if (!d.decision.allowed) {
        allowed = false;
        wait = std::max(wait, std::max<std::int64_t>(1, d.decision.retry_after_ms));
      }
    }
    if (allowed) co_return Turn::kReady;
  }
}

Task<bool> Session::WaitForUpstreamLimit(const rules::UpstreamConfig& upstream,
                                         const std::string& bucket, Exchange& ex) {
  const store::Clock& clock = *generation_->state->clock;
  const std::int64_t deadline = clock.NowMs() + upstream.learn_max_delay_ms;
  const Executor executor = co_await asio::this_coro::executor;
  Timer timer(executor);
  std::optional<DelayedGauge> gauge;
  for (;;) {
    const std::int64_t now = clock.NowMs();
    const store::CountResult checked =
        co_await Coordinate([&](store::Coordinator& c, store::CountSink& sink) {
          c.CheckLearned(upstream.name, bucket, now, sink);
        });
    if (checked.status != store::StoreStatus::kOk) {
      if (checked.source != store::ResultSource::kPolicyDenied) co_return true;
      co_await ReplyError(ex, http::status::service_unavailable, "store_unavailable",
                          "the rate-limit store is unavailable", 1);
      co_return false;
    }
    const std::int64_t wait = checked.value;
    if (wait == 0) co_return true;
    if (now + wait > deadline) {
      // The upstream would refuse it: answer for it, as it would.
      co_await ReplyError(ex, http::status::too_many_requests, "upstream_rate_limited",
                          "the upstream's rate limit is reached", (wait + 999) / 1000);
      co_return false;
    }
    if (!gauge) gauge.emplace(worker_.metrics());
    timer.expires_after(Ms(wait));
    co_await timer.async_wait(kUseTuple);
  }
}

Task<ErrorCode> Session::WriteContinue() {
  static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
  Lowest(stream_).expires_after(Ms(config_->timeouts.client_body_ms));
  auto [ec, n] = co_await Visit(stream_, [&](auto& s) {
    return asio::async_write(s, asio::buffer(kContinue.data(), kContinue.size()), kUseTuple);
  });
  co_return ec;
}

// What Forward's steps share about one upstream exchange.
struct Session::UpstreamCall {
  const rules::RouteConfig& route;
  UpstreamPool& pool;
  bool head_request = false;
  bool replayable = false;
  bool buffered = false;  // the request body (if any) is read whole before sending
  std::unique_ptr<UpstreamConnection> conn;
};

Task<void> Session::Forward(HeadParser& head, const rules::RouteConfig& route, Exchange& ex,
                            const LimitOutcome& limits) {
  const store::Clock& clock = *generation_->state->clock;
  const rules::TimeoutsConfig& timeouts = config_->timeouts;
  auto& req = head.get();
  const bool chunked = head.chunked();
  const std::uint64_t length = head.content_length().value_or(0);
  const bool has_body = chunked || length > 0;
  UpstreamCall call{route, *generation_->pools[route.upstream_index], false, false, false, {}};
  call.head_request = req.method() == http::verb::head;
  call.replayable = IsIdempotent(req.method());
  call.buffered = !chunked && length <= kBufferedBody;
  const bool expects_continue =
      has_body && beast::iequals(req[http::field::expect], "100-continue");

  PrepareForwardedRequest(
      req, peer_ip_, generation_->state->listener_tls[listener_] ? Scheme::kHttps : Scheme::kHttp);
  if (config_->server.via) req.set(http::field::via, "1.1 tollgate");
  req.version(11);
  if (chunked) req.chunked(true);
  if (websocket_) {
    // The upgrade fields are hop-by-hop, but a handshake goes on with them.
    req.set(http::field::upgrade, "websocket");
    req.set(http::field::connection, "Upgrade");
  }

  if (expects_continue) {
    if (co_await WriteContinue()) {
      ex.close = true;
      co_return;
    }
  }

  if (call.buffered && has_body) {
    whole_.emplace(std::move(head));
    whole_->body_limit(static_cast<std::uint64_t>(config_->limits.max_body_bytes));
    ErrorCode ec;
    if (!ParseBuffered(buffer_, *whole_, ec)) {
      Lowest(stream_).expires_after(Budget(timeouts.client_body_ms, ex));
      std::tie(ec, std::ignore) = co_await Visit(
          stream_, [&](auto& s) { return http::async_read(s, buffer_, *whole_, kUseTuple); });
    }
    if (ec) {
      ex.close = true;
      if (ec == beast::error::timeout) {
        co_await ReplyError(ex, http::status::request_timeout, "request_timeout",
                            "request body not received in time");
      } else if (!IsClientGone(ec)) {
        co_await ReplyError(ex, http::status::bad_request, "bad_request", "malformed request body");
      }
      co_return;
    }
    ex.bytes_in = whole_->get().body().size();
  }

  const rules::UpstreamConfig& upstream = config_->upstreams[route.upstream_index];
  std::optional<store::InflightGuard> upstream_place;
  if (upstream.max_connections > 0) {
    upstream_place = co_await AcquireUpstreamPlace(upstream);
    if (!upstream_place) {
      ex.close = ex.close || !call.buffered;  // an unread body would be taken for the next request
      co_await ReplyError(ex, static_cast<http::status>(upstream.max_connections_status),
                          "upstream_busy", "too many requests are in flight to the upstream", 1);
      co_return;
    }
  }
  std::string learned_bucket;
  if (upstream.learn_limits) {
    learned_bucket =
        LearnedBucketOf(upstream, route.name, req.target().substr(0, req.target().find('?')));
    const bool go = co_await WaitForUpstreamLimit(upstream, learned_bucket, ex);
    if (!go) {
      ex.close = ex.close || !call.buffered;
      co_return;
    }
  }

  const store::Instant upstream_start = clock.Now();
  ex.upstream_start_ms = upstream_start.ms;
  ex.upstream_started = upstream_start.steady;
  if (worker_.metrics() != nullptr) {
    ex.upstream_metric = generation_->state->upstream_ids[route.upstream_index];
  }
  bool sent = false;
  if (call.buffered) {
    sent = co_await SendBuffered(call, head, ex);
  } else {
    sent = co_await SendStreamed(call, head, ex);
  }
  if (!sent) co_return;
  if (websocket_ && res_head_->get().result() == http::status::switching_protocols) {
    // The tunnel holds the upstream place (and the session the
    // max_inflight ones) until it closes.
    co_await OpenTunnel(call, req[http::field::sec_websocket_key], ex);
    co_return;
  }

  // The response as the client sees it.
  auto& res = res_head_->get();
  if (upstream.learn_limits) {
    const algorithms::LearnedFacts facts = ReadLearnedFacts(res.result_int(), res, clock.UnixMs());
    // With on_error = "local", the Redis coordinator's decorator teaches
    // the process's own coordinator too.
    worker_.coordinator().Learn(upstream.name, learned_bucket, facts, clock.NowMs());
  }
  bool upstream_reusable = res_head_->keep_alive();
  const bool res_chunked = res_head_->chunked();
  const auto res_length = res_head_->content_length();
  const bool no_body = res_head_->is_done();
  const bool until_close = !no_body && !res_chunked && !res_length;
  ex.status = res.result_int();
  RemoveHopByHop(res);
  if (config_->server.via) res.set(http::field::via, "1.1 tollgate");
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
  extra_headers_.clear();
  if (limits.shown != nullptr) {
    AppendRateLimitHeaders(*limits.shown, limits.shown_decision, extra_headers_);
  }

  const RelayTimeouts to_client{Budget(timeouts.upstream_response_ms, ex),
                                Budget(timeouts.client_body_ms, ex), SteadyDeadline(ex)};
  bool complete = false;
  if (no_body) {
    MarkUpstreamEnd(clock, ex);
    wire_.clear();
    AppendWireHeader(res.base(), wire_, extra_headers_);
    ErrorCode wec;
    if (!TryWriteWire(stream_, wec)) {
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

Task<bool> Session::SendBuffered(UpstreamCall& call, HeadParser& head, Exchange& ex) {
  const std::int64_t connect_ms = config_->timeouts.upstream_connect_ms;
  for (int attempt = 0;; ++attempt) {
    // (GCC 12 destroys the result twice when co_await sits in a ?: expression.)
    ConnectResult cr;
    if (attempt == 0) {
      cr = call.pool.TakeIdle();
      if (!cr.connection) cr = co_await call.pool.Acquire(connect_ms);
    } else {
      cr = co_await call.pool.ConnectFresh(connect_ms);
    }
    ex.upstream = cr.server;
    if (!cr.connection) {
      co_await FailUpstream(call, cr.failure, {}, ex);
      co_return false;
    }
    call.conn = std::move(cr.connection);
    wire_.clear();
    if (whole_) {
      AppendWireHeader(whole_->get().base(), wire_);
      wire_.append(whole_->get().body());
    } else {
      AppendWireHeader(head.get().base(), wire_);
    }
    ErrorCode ec;
    if (!TryWriteWire(call.conn->stream, ec)) {
      ec =
          co_await WriteWire(call.conn->stream, Budget(config_->timeouts.upstream_response_ms, ex));
    }
    std::size_t received = 0;
    if (!ec) std::tie(ec, received) = co_await ReadResponseHead(call, ex);
    if (!ec) co_return true;
    // A pooled connection the upstream closed while it sat idle: send the
    // request once more on a fresh connection if that is safe.
    if (attempt == 0 && call.conn->reused && call.replayable && received == 0 &&
        IsStaleConnectionError(ec)) {
      continue;
    }
    co_await FailUpstream(call, ConnectFailure::kNone, ec, ex);
    co_return false;
  }
}

Task<bool> Session::SendStreamed(UpstreamCall& call, HeadParser& head, Exchange& ex) {
  const rules::TimeoutsConfig& timeouts = config_->timeouts;
  ConnectResult cr = call.pool.TakeIdle();
  if (!cr.connection) cr = co_await call.pool.Acquire(timeouts.upstream_connect_ms);
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
  RelayResult relayed =
      co_await Relay(stream_, buffer_, streamed, call.conn->stream, RelayBuffer(), to_upstream);
  ex.bytes_in = relayed.bytes;
  if (relayed.failure == RelayFailure::kRead) {
    ex.close = true;
    if (relayed.ec == http::error::body_limit) {
      co_await ReplyError(ex, http::status::payload_too_large, "body_too_large",
                          "request body exceeds the limit");
    } else if (relayed.ec == beast::error::timeout) {
      co_await ReplyError(ex, http::status::request_timeout, "request_timeout",
                          "request body not received in time");
    } else if (!IsClientGone(relayed.ec)) {
      co_await ReplyError(ex, http::status::bad_request, "bad_request", "malformed request body");
    }
    co_return false;
  }
  ErrorCode ec = relayed.ec;
  if (!ec) std::tie(ec, std::ignore) = co_await ReadResponseHead(call, ex);
  if (ec) {
    ex.close = true;
    co_await FailUpstream(call, ConnectFailure::kNone, ec, ex);
    co_return false;
  }
  co_return true;
}

Task<std::pair<ErrorCode, std::size_t>> Session::ReadResponseHead(UpstreamCall& call,
                                                                  Exchange& ex) {
  UpstreamConnection& c = *call.conn;
  std::size_t received = 0;  // bytes read from the upstream
  for (;;) {
    res_head_.emplace();
    res_head_->header_limit(kUpstreamHeaderLimit);
    res_head_->body_limit(boost::none);
    if (call.head_request) res_head_->skip(true);
    // Beast's async_read_header would do the same in two composed layers,
    // each tracking work on the executor: here the header is parsed in
    // place and only the missing bytes are read, under one deadline.
    ErrorCode ec;
    bool deadline_set = false;
    while (!ParseBuffered(c.buffer, *res_head_, ec, ParseUntil::kHeader)) {
      if (!deadline_set) {
        Lowest(c.stream).expires_after(Budget(config_->timeouts.upstream_response_ms, ex));
        deadline_set = true;
      }
      // The parser's header_limit bounds what is kept; reads are sized as
      // Beast's own.
      const std::size_t room = beast::read_size(c.buffer, kUpstreamHeaderLimit);
      auto [read_ec, n] = co_await Visit(
          c.stream, [&](auto& s) { return s.async_read_some(c.buffer.prepare(room), kUseTuple); });
      if (read_ec == asio::error::eof) {
        // As Beast's read: a header cut short is a partial message, no
        // header at all the end of the stream.
        ec = res_head_->got_some() ? ErrorCode(http::error::partial_message)
                                   : ErrorCode(http::error::end_of_stream);
        break;
      }
      if (read_ec) {
        ec = read_ec;
        break;
      }
      c.buffer.commit(n);
      received += n;
    }
    if (ec) co_return std::pair{ec, received};
    const unsigned status = res_head_->get().result_int();
    if (status < 100 || status >= 200 || status == 101) co_return std::pair{ErrorCode{}, received};
  }
}

Task<void> Session::FailUpstream(UpstreamCall& call, ConnectFailure failure, const ErrorCode& ec,
                                 Exchange& ex) {
  // An unread request body would be taken for the next request.
  ex.close = ex.close || !call.buffered;
  if (ThreadMetrics* metrics = worker_.metrics()) {
    const UpstreamFailure kind = failure == ConnectFailure::kTimeout || ec == beast::error::timeout
                                     ? UpstreamFailure::kTimeout
                                 : failure == ConnectFailure::kRefused ? UpstreamFailure::kConnect
                                                                       : UpstreamFailure::kReset;
    metrics->RecordUpstreamFailure(generation_->state->upstream_ids[call.route.upstream_index],
                                   kind);
  }
  if (failure == ConnectFailure::kTimeout || ec == beast::error::timeout) {
    co_await ReplyError(ex, http::status::gateway_timeout, "gateway_timeout",
                        "the upstream did not answer in time");
  } else {
    co_await ReplyError(ex, http::status::bad_gateway, "bad_gateway",
                        "the upstream is unavailable");
  }
}

Task<bool> Session::RespondBuffered(UpstreamCall& call, const RelayTimeouts& to_client,
                                    Exchange& ex) {
  const store::Clock& clock = *generation_->state->clock;
  UpstreamConnection& c = *call.conn;
  ResponseParser<http::string_body> body{std::move(*res_head_)};
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
  wire_.clear();
  AppendWireHeader(body.get().base(), wire_, extra_headers_);
  wire_.append(body.get().body());
  ex.bytes_out = body.get().body().size();
  ErrorCode wec;
  // The body took its time to arrive: the write gets what is left.
  if (!TryWriteWire(stream_, wec)) {
    wec = co_await WriteWire(stream_, to_client.Within(to_client.write));
  }
  if (wec) ex.close = true;
  co_return true;
}

Task<bool> Session::RespondStreamed(UpstreamCall& call, const RelayTimeouts& to_client,
                                    Exchange& ex) {
  const store::Clock& clock = *generation_->state->clock;
  UpstreamConnection& c = *call.conn;
  AddHeaderLines(extra_headers_, res_head_->get());
  ResponseParser<http::buffer_body> streamed{std::move(*res_head_)};
  streamed.body_limit(boost::none);
  RelayResult relayed =
      co_await Relay(c.stream, c.buffer, streamed, stream_, RelayBuffer(), to_client);
  MarkUpstreamEnd(clock, ex);
  ex.bytes_out = relayed.bytes;
  if (relayed.failure == RelayFailure::kNone) co_return true;
  // Headers are out: the only honest signal left is closing the connection.
  ex.close = true;
  if (relayed.failure == RelayFailure::kRead) ex.error = "upstream_body";
  co_return false;
}

Task<void> Session::OpenTunnel(UpstreamCall& call, std::string_view key, Exchange& ex) {
  MarkUpstreamEnd(*generation_->state->clock, ex);
  ex.close = true;  // the connection is the tunnel's now, or failed
  auto& res = res_head_->get();
  if (!AcceptsHandshake(res, key)) {
    // call.conn is dropped, not pooled: the upstream thinks it switched.
    co_await ReplyError(ex, http::status::bad_gateway, "bad_gateway",
                        "the upstream's WebSocket handshake answer is not valid");
    co_return;
  }
  ex.status = 101;
  RemoveHopByHop(res);
  res.set(http::field::upgrade, "websocket");
  res.set(http::field::connection, "Upgrade");
  if (config_->server.via) res.set(http::field::via, "1.1 tollgate");
  res.version(11);
  extra_headers_.clear();
  if (outcome_.shown != nullptr) {
    AppendRateLimitHeaders(*outcome_.shown, outcome_.shown_decision, extra_headers_);
  }
  wire_.clear();
  AppendWireHeader(res.base(), wire_, extra_headers_);
  ErrorCode ec;
  if (!TryWriteWire(stream_, ec)) {
    ec = co_await WriteWire(stream_, Budget(config_->timeouts.client_body_ms, ex));
  }
  if (ec) co_return;
  TunnelOptions options;
  options.idle = Ms(config_->timeouts.websocket_idle_ms);
  options.metrics = worker_.metrics();
  if (ex.route_metric >= 0) options.route_metric = ex.route_metric;
  const TunnelResult tunnel = co_await RunTunnel(stream_, buffer_, call.conn->stream,
                                                 call.conn->buffer, RelayBuffer(), options);
  ex.bytes_in = tunnel.bytes_in;
  ex.bytes_out = tunnel.bytes_out;
  if (tunnel.idle_timeout) ex.error = "websocket_idle";
}

void Session::AddHeaderLines(std::string_view lines, Fields& fields) {
  while (!lines.empty()) {
    const std::size_t end = lines.find("\r\n");
    const std::string_view line = lines.substr(0, end);
    const std::size_t colon = line.find(": ");
    fields.insert(line.substr(0, colon), line.substr(colon + 2));
    lines.remove_prefix(end + 2);
  }
}

bool Session::TryWriteWire(AnyStream& stream, ErrorCode& ec) {
  auto* plain = std::get_if<TcpStream>(&stream);
  if (plain == nullptr) return false;
  const std::size_t n = plain->TryWrite(asio::buffer(wire_), ec);
  if (ec || n == wire_.size()) return true;
  wire_.erase(0, n);
  return false;
}

Task<ErrorCode> Session::WriteWire(AnyStream& stream, std::chrono::steady_clock::duration timeout) {
  Lowest(stream).expires_after(timeout);
  auto [ec, n] = co_await Visit(
      stream, [&](auto& s) { return asio::async_write(s, asio::buffer(wire_), kUseTuple); });
  co_return ec;
}

LimitContext Session::MakeLimitContext(const GatewayState& state) const {
  const store::Clock& clock = *state.clock;
  const rules::StoreConfig& store = config_->store;
  // Redis with time = "client": gateways share wall-clock time, not the
  // monotonic scale of each process.
  const bool wall_clock =
      store.kind == rules::StoreKind::kRedis && store.redis.time == store::RedisTime::kClient;
  const std::int64_t now = clock.NowMs();
  LimitContext context{*state.identity,
                       *state.rule_set,
                       worker_.store(),
                       now,
                       wall_clock ? clock.UnixMs() : now};
  context.metrics = worker_.metrics();
  context.rule_ids = &state.rule_ids;
  context.rules_base = config_->rules.data();
  context.store_kind =
      store.kind == rules::StoreKind::kRedis ? StoreKindLabel::kRedis : StoreKindLabel::kLocal;
  context.describe = state.access_log != nullptr && state.access_log->enabled();
  return context;
}

Task<void> Session::ReplyError(Exchange& ex, http::status status, std::string_view code,
                               std::string_view message, std::int64_t retry_after_s) {
  http::response<http::string_body> res = MakeErrorResponse(status, code, message);
  if (retry_after_s > 0) res.set(http::field::retry_after, std::to_string(retry_after_s));
  res.keep_alive(!ex.close);
  ex.status = static_cast<unsigned>(status);
  ex.error = std::string(code);
  ex.bytes_out = res.body().size();
  Lowest(stream_).expires_after(Ms(config_->timeouts.client_body_ms));
  auto [ec, n] =
      co_await Visit(stream_, [&](auto& s) { return http::async_write(s, res, kUseTuple); });
  if (ec) ex.close = true;
}

void Session::Log(const Exchange& ex) {
  if (ThreadMetrics* metrics = worker_.metrics(); metrics != nullptr && ex.status != 0) {
    const GatewayState& state = *generation_->state;
    const auto now = store::LoopNow();
    const int route = ex.route_metric >= 0 ? ex.route_metric : state.unrouted_id;
    metrics->RecordRequest(route, ex.status,
                           std::chrono::duration<double>(now - ex.started).count());
    if (ex.upstream_metric >= 0) {
      const auto end = ex.upstream_ended > ex.upstream_started ? ex.upstream_ended : now;
      metrics->RecordUpstream(ex.upstream_metric,
                              std::chrono::duration<double>(end - ex.upstream_started).count());
    }
  }
  AccessLog* log = generation_->state->access_log;
  if (log == nullptr || !log->enabled()) return;
  const std::int64_t now = generation_->state->clock->NowMs();
  AccessRecord r;
  r.client = peer_ip_;
  r.method = ex.method.empty() ? std::string_view("-") : std::string_view(ex.method);
  r.target = ex.target.empty() ? std::string_view("-") : std::string_view(ex.target);
  r.version = ex.version;
  r.status = ex.status;
  r.bytes_in = ex.bytes_in;
  r.bytes_out = ex.bytes_out;
  r.duration_s = static_cast<double>(now - ex.start_ms) / 1000.0;
  if (ex.upstream_start_ms >= 0) {
    const std::int64_t end = ex.upstream_end_ms >= 0 ? ex.upstream_end_ms : now;
    r.upstream_s = static_cast<double>(end - ex.upstream_start_ms) / 1000.0;
  }
  r.route = ex.route;
  r.upstream = ex.upstream;
  r.user_agent = ex.user_agent;
  r.referer = ex.referer;
  r.error = ex.error;
  r.ratelimit = ex.ratelimit;
  r.limit_key = ex.limit_key;
  r.retry_after_ms = ex.retry_after_ms;
  log->Write(r);
}

}  // namespace tollgate::gateway
