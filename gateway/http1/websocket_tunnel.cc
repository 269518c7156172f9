#include "gateway/http1/websocket_tunnel.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <boost/asio/write.hpp>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "gateway/core/admission.h"
#include "gateway/core/limits.h"
#include "gateway/io/linger.h"
#include "gateway/io/relay.h"
#include "gateway/ops/metrics.h"
#include "gateway/worker.h"
#include "store/loop_time.h"
#include "store/store.h"

namespace tollgate::gateway {
namespace {

constexpr std::string_view kGuid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

bool HasToken(std::string_view value, std::string_view token) {
  for (const auto& t : http::token_list(value)) {
    if (beast::iequals(t, token)) return true;
  }
  return false;
}

template <typename Fn>
auto Visit(AnyStream& stream, Fn&& fn) {
  return std::visit(std::forward<Fn>(fn), stream);
}

// One tunnel's shared state; lives in RunTunnel's frame while its three
// parts (two directions and the watchdog) run: coroutines (Spawn) or
// completion handlers (BytePump, FramedPump), counted in `running`.
struct Tunnel {
  Tunnel(AnyStream& c, AnyStream& u, const TunnelOptions& o)
      : client(c),
        upstream(u),
        options(o),
        watchdog(Lowest(c).get_executor()),
        pause(Lowest(c).get_executor()),
        joined(Lowest(c).get_executor()) {}

  // Ends the tunnel: pending reads and writes on both streams complete
  // with operation_aborted, the watchdog and a held message wake; each
  // part sees `stopped` before it would start anything else.
  void Stop() {
    if (stopped) return;
    stopped = true;
    Lowest(client).cancel();
    Lowest(upstream).cancel();
    watchdog.cancel();
    pause.cancel();
  }

  // Runs `part` as a coroutine of its own. The parts are not joined with
  // Asio's awaitable operators (&&): their parallel_group connects a
  // cancellation slot to every operation of every part, a cost paid per
  // message (docs/performance.md). A part that throws ends the tunnel;
  // Join() rethrows it.
  void Spawn(Task<void> part) {
    Began();
    asio::co_spawn(joined.get_executor(), std::move(part), [this](std::exception_ptr e) {
      if (e) Fail(e);
      Ended();
    });
  }

  // A part threw `e`: the tunnel ends, and Join() rethrows it.
  void Fail(std::exception_ptr e) {
    if (!failure) failure = e;
    Stop();
  }

  // A part begins, or one has ended.
  void Began() { ++running; }
  void Ended() {
    if (--running == 0) joined.cancel();
  }

  // Until every part has ended: they refer to the tunnel and to what
  // RunTunnel holds.
  Task<void> Join() {
    while (running > 0) {
      joined.expires_at(Timer::time_point::max());
      co_await joined.async_wait(kUseTuple);
    }
    if (failure) std::rethrow_exception(failure);
  }

  AnyStream& client;
  AnyStream& upstream;
  const TunnelOptions& options;
  Timer watchdog;
  Timer pause;  // a message held by a delay or shaping rule
  Timer joined;  // woken when the last part ends
  int running = 0;  // parts not ended yet
  std::exception_ptr failure;  // the first part's that threw
  std::chrono::steady_clock::time_point last_activity = store::LoopNow();
  bool stopped = false;
  bool holding = false;  // a message is held: no idleness
  // Set when tollgate ends the tunnel: its close frame for the client,
  // which the upstream-to-client direction sends at the end of a frame.
  std::string client_close;
  TunnelResult result;
};

// Writes what of `data` the socket takes now, without waiting: the bytes
// taken (`ec` set on failure). A tunnel's message nearly always fits, and
// then needs no asynchronous operation, whose initiation, posted
// completion and coroutine resumption were most of the relay's user-space
// cost per message. Over TLS the bytes taken may be encrypted into records
// the socket did not all take (Flushed() false): an asynchronous write of
// the rest, even of nothing, sends them first.
std::size_t WriteNow(AnyStream& to, asio::const_buffer data, ErrorCode& ec) {
  if (auto* plain = std::get_if<TcpStream>(&to)) return plain->TryWrite(data, ec);
  auto& tls = std::get<TlsStream>(to);
  return tls.unsent() == 0 ? tls.TryWrite(data, ec) : 0;
}

// Nothing taken by WriteNow waits to be sent.
bool Flushed(AnyStream& to) {
  auto* tls = std::get_if<TlsStream>(&to);
  return tls == nullptr || tls->unsent() == 0;
}

// Writes `data` whole to `to` within the idle time, asynchronously: what
// WriteNow left. The bytes written.
Task<std::size_t> WriteLater(Tunnel& t, AnyStream& to, asio::const_buffer data, ErrorCode& ec) {
  Lowest(to).expires_after(t.options.idle);
  auto [error, n] =
      co_await Visit(to, [&](auto& s) { return asio::async_write(s, data, kUseTuple); });
  ec = error;
  co_return n;
}

// WriteNow, then WriteLater for the rest. For what does not go per message;
// a relay's hot path spells it out, without this coroutine's frame.
Task<std::size_t> Write(Tunnel& t, AnyStream& to, asio::const_buffer data, ErrorCode& ec) {
  std::size_t sent = WriteNow(to, data, ec);
  if (!ec && (sent < data.size() || !Flushed(to))) {
    sent += co_await WriteLater(t, to, data + sent, ec);
  }
  co_return sent;
}

// `n` of the peers' bytes went on: counts them. False when the tunnel ends
// (the write failed, or a part stopped the tunnel meanwhile).
bool Passed(Tunnel& t, bool in, std::size_t n, const ErrorCode& ec) {
  if (n > 0) {
    t.last_activity = store::LoopNow();
    (in ? t.result.bytes_in : t.result.bytes_out) += n;
    if (t.options.metrics != nullptr) {
      t.options.metrics->AddWebSocketBytes(t.options.route_metric, in, n);
    }
  }
  return !ec && !t.stopped;
}

// One direction of a tunnel without message rules: `from` to `to`, what
// `pending` holds first. Completion handlers, not a coroutine: resuming a
// coroutine per read (Asio's awaitable machinery, a frame for each
// operation's initiation) is a large part of a relayed message's cost
// (docs/performance.md).
class BytePump {
 public:
  BytePump(Tunnel& t, AnyStream& from, beast::flat_buffer& pending, AnyStream& to, char* buffer,
        bool in)
      : t_(t), from_(from), pending_(pending), to_(to), buffer_(buffer), in_(in) {}
  BytePump(const BytePump&) = delete;
  BytePump& operator=(const BytePump&) = delete;

  // A part of `t` until the direction ends, which stops the tunnel.
  void Start() {
    t_.Began();
    if (pending_.size() > 0) {
      Send(pending_.data());
    } else {
      Read();
    }
  }

 private:
  struct OnRead {
    BytePump* pump;
    void operator()(const ErrorCode& ec, std::size_t n) const { pump->Received(ec, n); }
  };
  struct OnWritten {
    BytePump* pump;
    void operator()(const ErrorCode& ec, std::size_t n) const {
      pump->Sent(pump->sent_ + n, ec);
    }
  };

  void Read() {
    if (t_.stopped) {
      End();
      return;
    }
    Lowest(from_).expires_never();
    Visit(from_, [this](auto& s) {
      s.async_read_some(asio::buffer(buffer_, kRelayChunk), OnRead{this});
    });
  }

  void Received(const ErrorCode& ec, std::size_t n) {
    // End of stream, reset, or TLS truncation: the tunnel ends once what
    // came with it went on.
    read_failed_ = static_cast<bool>(ec);
    if (t_.stopped || (read_failed_ && n == 0)) {
      End();
      return;
    }
    if (n == 0) {
      Read();
      return;
    }
    t_.last_activity = store::LoopNow();
    Send(asio::const_buffer(buffer_, n));
  }

  // Writes `data` whole within the idle time: at once when the socket
  // takes it (WriteNow), the rest asynchronously.
  void Send(asio::const_buffer data) {
    ErrorCode ec;
    sent_ = WriteNow(to_, data, ec);
    if (ec || (sent_ == data.size() && Flushed(to_))) {
      Sent(sent_, ec);
      return;
    }
    Lowest(to_).expires_after(t_.options.idle);
    Visit(to_, [&](auto& s) { asio::async_write(s, data + sent_, OnWritten{this}); });
  }

  void Sent(std::size_t n, const ErrorCode& ec) {
    if (pending_.size() > 0) pending_.consume(pending_.size());
    if (!Passed(t_, in_, n, ec) || read_failed_) {
      End();
      return;
    }
    Read();
  }

  void End() {
    t_.Stop();
    t_.Ended();
  }

  Tunnel& t_;
  AnyStream& from_;
  beast::flat_buffer& pending_;
  AnyStream& to_;
  char* buffer_;  // kRelayChunk bytes
  bool in_;
  bool read_failed_ = false;
  std::size_t sent_ = 0;  // of the write under way, by WriteNow
};

// Ends the tunnel once no byte went either way for the idle time.
Task<void> Watch(Tunnel& t) {
  while (!t.stopped) {
    if (t.holding) t.last_activity = store::LoopNow();
    const auto due = t.last_activity + t.options.idle;
    if (store::LoopNow() >= due) {
      t.result.error = "websocket_idle";
      t.Stop();
      break;
    }
    t.watchdog.expires_at(due);
    co_await t.watchdog.async_wait(kUseTuple);
  }
}

// Counts a tunnel in tollgate_websocket_connections while it is open.
class OpenGauge {
 public:
  OpenGauge(ThreadMetrics* metrics, int route) : metrics_(metrics), route_(route) {
    if (metrics_ != nullptr) metrics_->AddWebSockets(route_, 1);
  }
  ~OpenGauge() {
    if (metrics_ != nullptr) metrics_->AddWebSockets(route_, -1);
  }
  OpenGauge(const OpenGauge&) = delete;
  OpenGauge& operator=(const OpenGauge&) = delete;

 private:
  ThreadMetrics* metrics_;
  int route_;
};

// How tollgate ends a tunnel: the close frame's code and reason, and the
// access log's word.
struct Ending {
  CloseCode code;
  std::string_view reason;
  std::string_view error;
};
constexpr Ending kRateLimited{CloseCode::kPolicyViolation, "rate_limited",
                              "websocket_rate_limited"};
constexpr Ending kStoreUnavailable{CloseCode::kTryAgainLater, "store_unavailable",
                                   "websocket_store_unavailable"};
constexpr Ending kTooBig{CloseCode::kMessageTooBig, "message_too_big", "websocket_too_big"};
constexpr Ending kProtocolError{CloseCode::kProtocolError, "protocol_error",
                                "websocket_protocol_error"};

// Decides the client's data messages by the tunnel's message rules, through
// the worker's store, as a request's rate rules are decided (gateway/core/
// limits.h), and holds a message that delay rules do not allow yet.
class MessageLimiter final : public BatchWaker {
 public:
  MessageLimiter(const TunnelOptions& options, const Executor& executor)
      : limits_(options.messages),
        state_(*limits_.state),
        metrics_(options.metrics),
        context_(MakeLimitContext(state_, *limits_.store, metrics_)),
        timer_(executor) {
    context_.describe = false;  // one log line per tunnel, not per message
    for (const rules::RuleHit& hit : limits_.hits) {
      all_.push_back(&hit);
      all_hashes_.push_back(store::KeyHash(hit.key));
    }
    batch_.set_waker(this);
  }
  MessageLimiter(const MessageLimiter&) = delete;
  MessageLimiter& operator=(const MessageLimiter&) = delete;

  // Starts deciding the message about to start. True when that is all (the
  // store answered inline and the message needs no wait, the usual case
  // with the local store: no coroutine): `ending` is the decision, nullopt
  // when it may go on. False: Admit() finishes the decision.
  bool AdmitNow(std::optional<Ending>& ending) {
    Ask(all_, all_hashes_);
    if (!batch_.done()) return false;
    Settle();
    if (outcome_.verdict == Verdict::kDelay || outcome_.delay_ms > 0) return false;
    ending = Refusal(outcome_);
    return true;
  }

  // What AdmitNow left: the store's answer, any wait the message has to
  // make, and the decision after it (nullopt: it may go on).
  Task<std::optional<Ending>> Admit(Tunnel& t) {
    if (!batch_.done()) {
      co_await AwaitBatch();
      Settle();
    }
    if (outcome_.verdict == Verdict::kDelay) {
      // (GCC 12 miscompiles co_await inside conditions, && and ?: : each
      // is a statement of its own.)
      const bool turn = co_await WaitForTurn(t, outcome_.delayed);
      if (!turn) co_return kRateLimited;
    } else if (const std::optional<Ending> refused = Refusal(outcome_)) {
      co_return refused;
    }
    if (outcome_.delay_ms > 0) {
      co_await Hold(t, outcome_.delay_ms);
    }
    co_return std::nullopt;
  }

 private:
  void Wake() override { timer_.cancel(); }

  static std::optional<Ending> Refusal(const LimitOutcome& outcome) {
    if (outcome.verdict == Verdict::kStoreUnavailable) return kStoreUnavailable;
    if (outcome.verdict == Verdict::kReject) return kRateLimited;
    return std::nullopt;
  }

  // Asks the store about `hits` (`key_hashes`: their keys' hashes, or
  // empty); the answers may come inline.
  void Ask(const std::vector<const rules::RuleHit*>& hits,
           std::span<const std::uint64_t> key_hashes = {}) {
    RestampLimitContext(state_, context_);
    asked_ = store::LoopNow();
    batch_.Start(context_, hits, 0, key_hashes);
  }

  // Awaits every answer Ask() did not get inline. Never cut short: the
  // store writes into the batch until then.
  Task<void> AwaitBatch() {
    while (!batch_.done()) {
      timer_.expires_at(Timer::time_point::max());
      co_await timer_.async_wait(kUseTuple);
    }
  }

  void RecordStore() {
    if (metrics_ != nullptr) {
      metrics_->RecordStore(context_.store_kind,
                            std::chrono::duration<double>(store::LoopNow() - asked_).count());
    }
  }

  // The batch of all the rules is done: what it means for the message.
  void Settle() {
    RecordStore();
    FinishLimits(context_, all_, batch_, outcome_);
  }

  // Asks about `hits` and awaits every answer.
  Task<void> Decide(const std::vector<const rules::RuleHit*>& hits) {
    Ask(hits);
    if (!batch_.done()) {
      co_await AwaitBatch();
    }
    RecordStore();
  }

  // Sleeps `ms` with the client unread; false when the tunnel ended.
  Task<bool> Hold(Tunnel& t, std::int64_t ms) {
    if (t.stopped) co_return false;
    t.holding = true;
    t.pause.expires_after(Ms(ms));
    co_await t.pause.async_wait(kUseTuple);
    t.holding = false;
    t.last_activity = store::LoopNow();
    co_return !t.stopped;
  }

  // Until the delay rules that limited the message allow it: each wait is
  // the longest retry_after among those still limiting, and the message is
  // refused once the next wait would pass the smallest max_delay. Only
  // these rules are decided again: the others counted the message already.
  Task<bool> WaitForTurn(Tunnel& t, const std::vector<DelayedHit>& delayed) {
    const store::Clock& clock = *state_.clock;
    const std::int64_t start = clock.NowMs();
    std::int64_t deadline = std::numeric_limits<std::int64_t>::max();
    std::int64_t wait = 0;
    again_.clear();
    for (const DelayedHit& d : delayed) {
      deadline = std::min(deadline, start + d.hit->rule->max_delay_ms);
      wait = std::max(wait, d.decision.retry_after_ms);
      again_.push_back(d.hit);
    }
    for (;;) {
      if (clock.NowMs() + wait > deadline) co_return false;
      const bool held = co_await Hold(t, std::max<std::int64_t>(1, wait));
      if (!held) co_return false;
      co_await Decide(again_);
      wait = 0;
      for (std::size_t i = 0; i < again_.size(); ++i) {
        // The store's decision, or what on_error answered for it.
        const algorithms::Decision& d = batch_.result(i).decision;
        if (!d.allowed) wait = std::max(wait, std::max<std::int64_t>(1, d.retry_after_ms));
      }
      if (wait == 0) co_return true;
    }
  }

  const MessageLimits& limits_;
  const GatewayState& state_;
  ThreadMetrics* metrics_;  // null: metrics are off
  // Made once, its clocks and overrides current again for each Ask, rather
  // than built per message.
  LimitContext context_;
  std::chrono::steady_clock::time_point asked_;  // when
  LimitOutcome outcome_;  // the message's, once all_ are decided
  std::vector<const rules::RuleHit*> all_;
  // store::KeyHash of all_'s keys: a tunnel's keys never change, so they
  // are hashed once, not per message.
  std::vector<std::uint64_t> all_hashes_;
  std::vector<const rules::RuleHit*> again_;  // the delay rules still limiting
  DecisionBatch batch_;
  Timer timer_;  // woken by the batch's last answer
};

// A masking key for tollgate's close frame to the upstream (RFC 6455 §5.3
// wants it unpredictable).
std::array<std::uint8_t, 4> MaskingKey() {
  std::array<std::uint8_t, 4> key{};
  if (RAND_bytes(key.data(), static_cast<int>(key.size())) != 1) key = {0x5a, 0xa5, 0x3c, 0xc3};
  return key;
}

// tollgate ends the tunnel (from the client-to-upstream direction, at the
// start of a client frame): the client's close frame goes once the other
// direction is at the end of a frame, nothing from the upstream after it
// (not its answer to the masked close frame it gets now).
Task<void> Close(Tunnel& t, const Ending& ending) {
  t.result.error = ending.error;
  t.client_close = CloseFrame(ending.code, ending.reason);
  // Wakes the other direction if it is waiting for the upstream.
  if (!t.stopped) Lowest(t.upstream).cancel();
  const std::string frame = CloseFrame(ending.code, ending.reason, MaskingKey());
  ErrorCode ec;
  co_await Write(t, t.upstream, asio::buffer(frame), ec);
}

// How long a tunnel that tollgate closed waits for the client to close
// too, and how much it reads meanwhile at most.
constexpr std::chrono::seconds kLinger{1};
constexpr std::size_t kLingerBytes = std::size_t{1} << 20;

// After tollgate's close frame the client may still send what it wrote
// before reading that frame: tollgate ends its side (a FIN after the close
// frame: the client answers by closing) and lingers (gateway/io/linger.h).
Task<void> Linger(Tunnel& t) {
  TcpStream& client = Lowest(t.client);
  ErrorCode ignored;
  client.socket().shutdown(tcp::socket::shutdown_send, ignored);
  co_await gateway::Linger(client, kLinger, kLingerBytes, &t.stopped);
}

// One direction of a tunnel with message limits: as BytePump, but bytes
// pass only as their frames allow (PassNow). Client to upstream, each data
// message is admitted first, and the bytes before it go first when it has
// to wait or ends the tunnel. Upstream to client, once tollgate ends the
// tunnel, the frame under way is finished, the client's close frame
// follows it, and the tunnel lingers (see Linger). What cannot be done at
// once (a decision the store gives later, a delay, a write the socket does
// not take whole, tollgate's close frames) goes on in a coroutine, after
// which the handlers take over again: the usual message costs no
// coroutine resumption.
class FramedPump {
 public:
  FramedPump(Tunnel& t, AnyStream& from, beast::flat_buffer& pending, AnyStream& to, char* buffer,
             bool in, FrameParser frames, MessageLimiter* limiter)
      : t_(t),
        from_(from),
        pending_(pending),
        to_(to),
        buffer_(buffer),
        in_(in),
        frames_(frames),
        limiter_(limiter) {}
  FramedPump(const FramedPump&) = delete;
  FramedPump& operator=(const FramedPump&) = delete;

  // A part of `t` until the direction ends.
  void Start() {
    t_.Began();
    if (pending_.size() > 0) {
      Spawn(PassPending());
    } else {
      Read();
    }
  }

 private:
  // What PassNow left to do.
  enum class Stall {
    kNone,    // the bytes passed; the start of a frame not whole yet is held
    kAdmit,   // the message just started waits for MessageLimiter::Admit
    kWrite,   // parsed bytes wait for the socket
    kEnding,  // tollgate ends the tunnel (ending_) after the parsed bytes
    kFailed,  // the tunnel ends: a write failed, or it was stopped
  };

  struct OnRead {
    FramedPump* pump;
    void operator()(const ErrorCode& ec, std::size_t n) const { pump->Received(ec, n); }
  };

  void Read() {
    if (t_.stopped) {
      End();
      return;
    }
    if (!in_ && !t_.client_close.empty() && frames_.at_frame_end()) {
      Spawn(CloseClient());
      return;
    }
    Lowest(from_).expires_never();
    Visit(from_, [this](auto& s) {
      s.async_read_some(asio::buffer(buffer_ + held_, kRelayChunk - held_), OnRead{this});
    });
  }

  void Received(const ErrorCode& ec, std::size_t n) {
    read_error_ = ec;
    if (t_.stopped) {
      End();
      return;
    }
    if (n > 0) {
      t_.last_activity = store::LoopNow();
      Begin(std::string_view(buffer_, held_ + n));
      const Stall stall = PassNow();
      if (stall != Stall::kNone) {
        Spawn(Resume(stall));
        return;
      }
    }
    Continue(true);
  }

  // After the bytes of a read passed (`ok`), or the tunnel ends.
  void Continue(bool ok) {
    // Close() cancels the read that waits for the upstream: the close
    // frame for the client is due.
    const bool woken = read_error_ == asio::error::operation_aborted && !in_ &&
                       !t_.client_close.empty();
    if (!ok || (read_error_ && !woken)) {
      End();
      return;
    }
    Read();
  }

  // The bytes of `data` (at the start of `buffer_`) are to pass.
  void Begin(std::string_view data) {
    if (!in_ && !t_.client_close.empty()) {
      // tollgate is closing: only the rest of the frame under way goes on.
      data = data.substr(0, frames_.at_frame_end()
                                ? 0
                                : std::min<std::uint64_t>(data.size(), frames_.payload_left()));
    }
    data_ = data;
    parsed_ = 0;
    sent_ = 0;
    all_parsed_ = false;
    ending_.reset();
  }

  // Passes what the frames of data_ allow on to `to_` and keeps the rest
  // (the start of a frame not whole yet) at the front of buffer_, as far
  // as that goes without waiting.
  Stall PassNow() {
    while (!all_parsed_ && !ending_) {
      const FrameStep step = frames_.Parse(data_.substr(parsed_));
      parsed_ += step.consumed;
      if (step.event == FrameEvent::kNeedMore) {
        all_parsed_ = true;
      } else if (step.event == FrameEvent::kMessageStart) {
        if (!limiter_->AdmitNow(ending_)) return Stall::kAdmit;
      } else {
        ending_ = step.event == FrameEvent::kTooBig ? kTooBig : kProtocolError;
      }
    }
    if (parsed_ > sent_) {
      ErrorCode ec;
      const std::size_t n = WriteNow(to_, Unsent(), ec);
      sent_ += n;
      if (!Passed(t_, in_, n, ec)) return Stall::kFailed;
      if (sent_ < parsed_ || !Flushed(to_)) return Stall::kWrite;
    }
    if (ending_) return Stall::kEnding;
    held_ = data_.size() - parsed_;
    // Usually nothing: a read ends with a whole frame.
    if (held_ > 0) std::memmove(buffer_, data_.data() + parsed_, held_);
    return Stall::kNone;
  }

  asio::const_buffer Unsent() const {
    return asio::buffer(data_.data() + sent_, parsed_ - sent_);
  }

  // Does what `stall` waits for, then PassNow again, until data_ passed
  // (true) or the tunnel ends.
  Task<bool> PassLater(Stall stall) {
    for (;;) {
      if (stall == Stall::kNone) co_return true;
      if (stall == Stall::kFailed) co_return false;
      if (stall == Stall::kEnding) {
        co_await Close(t_, *ending_);
        co_return false;
      }
      if (stall == Stall::kAdmit) {
        const std::optional<Ending> ending = co_await limiter_->Admit(t_);
        if (t_.stopped) co_return false;
        ending_ = ending;
      } else {
        ErrorCode ec;
        const std::size_t n = co_await WriteLater(t_, to_, Unsent(), ec);
        sent_ += n;
        if (!Passed(t_, in_, n, ec)) co_return false;
      }
      stall = PassNow();
    }
  }

  Task<void> Resume(Stall stall) {
    const bool ok = co_await PassLater(stall);
    Continue(ok);
  }

  // What the handshake's read took past the handshake goes first; it may
  // hold more than a relay buffer: in chunks.
  Task<void> PassPending() {
    const auto* bytes = static_cast<const char*>(pending_.data().data());
    std::string_view rest(bytes, pending_.size());
    bool ok = true;
    while (ok && !rest.empty()) {
      const std::size_t take = std::min(rest.size(), kRelayChunk - held_);
      std::memcpy(buffer_ + held_, rest.data(), take);
      rest.remove_prefix(take);
      Begin(std::string_view(buffer_, held_ + take));
      const Stall stall = PassNow();
      if (stall != Stall::kNone) {
        ok = co_await PassLater(stall);
      }
    }
    pending_.consume(pending_.size());
    Continue(ok);
  }

  // Upstream to client, once tollgate closes and the frame under way has
  // ended: tollgate's close frame, then Linger.
  Task<void> CloseClient() {
    ErrorCode ec;
    co_await Write(t_, to_, asio::buffer(t_.client_close), ec);
    if (!ec && !t_.stopped) {
      co_await Linger(t_);
    }
    End();
  }

  // Runs `part` as a coroutine; it ends by handing back to the handlers
  // (Continue) or by ending the pump.
  void Spawn(Task<void> part) {
    asio::co_spawn(Lowest(from_).get_executor(), std::move(part), [this](std::exception_ptr e) {
      if (e) {
        t_.Fail(e);
        End();
      }
    });
  }

  void End() {
    // Once tollgate closes, the other direction ends the tunnel.
    if (!in_ || t_.client_close.empty()) t_.Stop();
    t_.Ended();
  }

  Tunnel& t_;
  AnyStream& from_;
  beast::flat_buffer& pending_;
  AnyStream& to_;
  char* buffer_;  // kRelayChunk bytes: `held_` of them wait at its front
  bool in_;
  FrameParser frames_;
  MessageLimiter* limiter_;  // client to upstream only
  std::size_t held_ = 0;
  ErrorCode read_error_;  // of the last read
  // The bytes passing now (in buffer_): parsed_ of them parsed, sent_ of
  // those written; ending_: tollgate ends the tunnel after the parsed ones.
  std::string_view data_;
  std::size_t parsed_ = 0;
  std::size_t sent_ = 0;
  bool all_parsed_ = false;
  std::optional<Ending> ending_;
};
}  // namespace

bool IsWebSocketHandshake(const http::request_header<Fields>& req, bool has_body) {
  if (req.method() != http::verb::get || req.version() != 11 || has_body) return false;
  const auto upgrade = req.find(http::field::upgrade);
  if (upgrade == req.end() || !HasToken(upgrade->value(), "websocket")) return false;
  for (auto it = req.find(http::field::connection);
       it != req.end() && it->name() == http::field::connection; ++it) {
    if (HasToken(it->value(), "upgrade")) return true;
  }
  return false;
}

std::string WebSocketAccept(std::string_view key) {
  std::string input(key);
  input.append(kGuid);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_size = 0;
  EVP_Digest(input.data(), input.size(), digest, &digest_size, EVP_sha1(), nullptr);
  std::string out(4 * ((digest_size + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), digest,
                                static_cast<int>(digest_size));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

bool AcceptsHandshake(const http::response_header<Fields>& res, std::string_view key) {
  const auto accept = res.find(http::field::sec_websocket_accept);
  if (accept == res.end() || key.empty()) return false;
  std::string_view value = accept->value();
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  return value == WebSocketAccept(key);
}

Compression NegotiatedCompression(const http::response_header<Fields>& res) {
  for (auto it = res.find(http::field::sec_websocket_extensions);
       it != res.end() && it->name() == http::field::sec_websocket_extensions; ++it) {
    if (NamesPerMessageDeflate(it->value())) return Compression::kPerMessageDeflate;
  }
  return Compression::kNone;
}

Task<TunnelResult> RunTunnel(AnyStream& client, beast::flat_buffer& client_buffer,
                             AnyStream& upstream, beast::flat_buffer& upstream_buffer, char* down,
                             const TunnelOptions& options) {
  const OpenGauge gauge(options.metrics, options.route_metric);
  const auto up = std::make_unique_for_overwrite<char[]>(kRelayChunk);
  Tunnel t(client, upstream, options);
  if (options.messages.hits.empty()) {
    BytePump in(t, client, client_buffer, upstream, up.get(), true);
    BytePump out(t, upstream, upstream_buffer, client, down, false);
    in.Start();
    out.Start();
    t.Spawn(Watch(t));
    co_await t.Join();
    co_return t.result;
  }
  const MessageLimits& limits = options.messages;
  MessageLimiter limiter(options, Lowest(client).get_executor());
  const auto max_message =
      static_cast<std::uint64_t>(limits.state->config->limits.max_websocket_message_bytes);
  FramedPump in(t, client, client_buffer, upstream, up.get(), true,
                FrameParser(FrameSender::kClient, max_message, limits.compression), &limiter);
  FramedPump out(t, upstream, upstream_buffer, client, down, false,
                 FrameParser(FrameSender::kServer, max_message, limits.compression), nullptr);
  in.Start();
  out.Start();
  t.Spawn(Watch(t));
  co_await t.Join();
  co_return t.result;
}

}  // namespace tollgate::gateway
