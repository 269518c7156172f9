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

#include "gateway/core/message_admission.h"
#include "gateway/http1/websocket_relay.h"
#include "gateway/io/linger.h"
#include "gateway/io/relay.h"
#include "gateway/telemetry/metrics.h"
#include "gateway/serve/worker.h"
#include "base/loop_time.h"
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

// The access log's word and close frame for a message the limiter refused;
// nullopt when it may go on.
std::optional<Ending> EndingOf(MessageVerdict verdict) {
  switch (verdict) {
    case MessageVerdict::kRateLimited:
      return kRateLimited;
    case MessageVerdict::kStoreUnavailable:
      return kStoreUnavailable;
    case MessageVerdict::kPass:
      break;
  }
  return std::nullopt;
}

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
             TunnelDirection direction, FrameParser frames, MessageLimiter* limiter)
      : t_(t),
        from_(from),
        pending_(pending),
        to_(to),
        buffer_(buffer),
        direction_(direction),
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
    if (direction_ == TunnelDirection::kOut && !t_.client_close.empty() && frames_.at_frame_end()) {
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
    const bool woken = read_error_ == asio::error::operation_aborted &&
                       direction_ == TunnelDirection::kOut && !t_.client_close.empty();
    if (!ok || (read_error_ && !woken)) {
      End();
      return;
    }
    Read();
  }

  // The bytes of `data` (at the start of `buffer_`) are to pass.
  void Begin(std::string_view data) {
    if (direction_ == TunnelDirection::kOut && !t_.client_close.empty()) {
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
        MessageVerdict verdict = MessageVerdict::kPass;
        if (!limiter_->AdmitNow(verdict)) return Stall::kAdmit;
        ending_ = EndingOf(verdict);
      } else {
        ending_ = step.event == FrameEvent::kTooBig ? kTooBig : kProtocolError;
      }
    }
    if (parsed_ > sent_) {
      ErrorCode ec;
      const std::size_t n = WriteNow(to_, Unsent(), ec);
      sent_ += n;
      if (!Passed(t_, direction_, n, ec)) return Stall::kFailed;
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
        const MessageVerdict verdict = co_await limiter_->Admit(t_);
        if (t_.stopped) co_return false;
        ending_ = EndingOf(verdict);
      } else {
        ErrorCode ec;
        const std::size_t n = co_await WriteLater(t_, to_, Unsent(), ec);
        sent_ += n;
        if (!Passed(t_, direction_, n, ec)) co_return false;
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
    if (direction_ == TunnelDirection::kOut || t_.client_close.empty()) t_.Stop();
    t_.Ended();
  }

  Tunnel& t_;
  AnyStream& from_;
  beast::flat_buffer& pending_;
  AnyStream& to_;
  char* buffer_;  // kRelayChunk bytes: `held_` of them wait at its front
  TunnelDirection direction_;
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

namespace {

// A tunnel without message rules: its frame holds no more than the two
// directions need, for as long as the tunnel lasts.
Task<TunnelResult> RelayBytes(AnyStream& client, beast::flat_buffer& client_buffer,
                              AnyStream& upstream, beast::flat_buffer& upstream_buffer,
                              const TunnelOptions& options) {
  const OpenGauge gauge(options.metrics, options.route_metric);
  Tunnel t(client, upstream, options);
  BytePump in(t, client, client_buffer, upstream, TunnelDirection::kIn);
  BytePump out(t, upstream, upstream_buffer, client, TunnelDirection::kOut);
  in.Start();
  out.Start();
  t.Spawn(Watch(t));
  co_await t.Join();
  co_return t.result;
}

Task<TunnelResult> RelayFrames(AnyStream& client, beast::flat_buffer& client_buffer,
                               AnyStream& upstream, beast::flat_buffer& upstream_buffer,
                               const TunnelOptions& options) {
  const OpenGauge gauge(options.metrics, options.route_metric);
  const auto up = std::make_unique_for_overwrite<char[]>(kRelayChunk);
  const auto down = std::make_unique_for_overwrite<char[]>(kRelayChunk);
  Tunnel t(client, upstream, options);
  const MessageLimits& limits = options.messages;
  MessageLimiter limiter(limits.hits, *limits.state, *limits.store, options.metrics,
                         Lowest(client).get_executor());
  const auto max_message =
      static_cast<std::uint64_t>(limits.state->config->limits.max_websocket_message_bytes);
  FramedPump in(t, client, client_buffer, upstream, up.get(), TunnelDirection::kIn,
                FrameParser(FrameSender::kClient, max_message, limits.compression), &limiter);
  FramedPump out(t, upstream, upstream_buffer, client, down.get(), TunnelDirection::kOut,
                 FrameParser(FrameSender::kServer, max_message, limits.compression), nullptr);
  in.Start();
  out.Start();
  t.Spawn(Watch(t));
  co_await t.Join();
  co_return t.result;
}

}  // namespace

// Not a coroutine: the tunnel's own is one of the two above.
Task<TunnelResult> RunTunnel(AnyStream& client, beast::flat_buffer& client_buffer,
                             AnyStream& upstream, beast::flat_buffer& upstream_buffer,
                             const TunnelOptions& options) {
  if (options.messages.hits.empty()) {
    return RelayBytes(client, client_buffer, upstream, upstream_buffer, options);
  }
  return RelayFrames(client, client_buffer, upstream, upstream_buffer, options);
}

}  // namespace tollgate::gateway
