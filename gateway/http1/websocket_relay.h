// Internal to websocket_tunnel.cc, its one includer: a tunnel's shared
// state (Tunnel), the writes both directions make, the byte relay of a
// tunnel without message rules (BytePump) and the idle watchdog. Internal
// linkage, so the relay's hot path compiles as if written in the .cc.
// Worker thread only.
#pragma once

#include <algorithm>
#include <boost/asio/write.hpp>
#include <chrono>
#include <cstdint>
#include <exception>
#include <string>
#include <variant>

#include "base/loop_time.h"
#include "gateway/core/message_admission.h"
#include "gateway/http1/websocket_tunnel.h"
#include "gateway/io/net.h"
#include "gateway/io/read_now.h"
#include "gateway/io/read_util.h"
#include "gateway/io/readable_wait.h"
#include "gateway/io/relay.h"
#include "gateway/telemetry/metrics.h"

namespace tollgate::gateway {
namespace {

// One tunnel's shared state; lives in RunTunnel's frame while its three
// parts (two directions and the watchdog) run: coroutines (Spawn) or
// completion handlers (BytePump, FramedPump), counted in `running`.
struct Tunnel final : MessageHold {
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

  // Sleeps `ms` with the client unread (a message held by a delay or
  // shaping rule); false when the tunnel ended.
  Task<bool> Hold(std::int64_t ms) override {
    if (stopped) co_return false;
    holding = true;
    pause.expires_after(Ms(ms));
    co_await pause.async_wait(kUseTuple);
    holding = false;
    last_activity = store::LoopNow();
    co_return !stopped;
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
bool Passed(Tunnel& t, TunnelDirection direction, std::size_t n, const ErrorCode& ec) {
  if (n > 0) {
    t.last_activity = store::LoopNow();
    (direction == TunnelDirection::kIn ? t.result.bytes_in : t.result.bytes_out) += n;
    if (t.options.metrics != nullptr) {
      t.options.metrics->AddWebSocketBytes(t.options.route_metric, direction, n);
    }
  }
  return !ec && !t.stopped;
}

// One direction of a tunnel without message rules: `from` to `to`, what
// `pending` holds first. Completion handlers, not a coroutine: resuming a
// coroutine per read (Asio's awaitable machinery, a frame for each
// operation's initiation) is a large part of a relayed message's cost
// (docs/performance.md). Between messages it holds no buffer: it waits for
// `from` to be readable (ReadableWait), then reads with ReadNow into a
// RelayChunk it gives back once the bytes went on.
class BytePump {
 public:
  BytePump(Tunnel& t, AnyStream& from, beast::flat_buffer& pending, AnyStream& to,
           TunnelDirection direction)
      : t_(t), from_(from), pending_(pending), to_(to), direction_(direction) {}
  BytePump(const BytePump&) = delete;
  BytePump& operator=(const BytePump&) = delete;

  // A part of `t` until the direction ends, which stops the tunnel.
  void Start() {
    t_.Began();
    Lowest(from_).expires_never();
    NoteHeldBytes(from_);
    if (pending_.size() > 0) {
      Send(pending_.data());
    } else {
      pending_.shrink_to_fit();
      Read();
    }
  }

 private:
  struct OnReadable {
    BytePump* pump;
    void operator()(const ErrorCode& ec, std::size_t) const { pump->Readable(ec); }
  };
  struct OnWritten {
    BytePump* pump;
    void operator()(const ErrorCode& ec, std::size_t n) const {
      pump->Sent(pump->sent_ + n, ec);
    }
  };

  void Read() {
    chunk_.Release();
    if (t_.stopped) {
      End();
      return;
    }
    Lowest(from_).socket().async_receive(ReadableWait(), ReadableWait::kFlags, OnReadable{this});
  }

  void Readable(const ErrorCode& ec) {
    if (ec) {
      Received(ec, 0);
      return;
    }
    ErrorCode rec;
    bool exhausted = false;
    const std::size_t n = ReadNow(from_, asio::buffer(chunk_.Get(), kRelayChunk), exhausted, rec);
    Received(rec, n);
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
    Send(asio::const_buffer(chunk_.Get(), n));
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
    if (pending_.size() > 0) {
      pending_.consume(pending_.size());
      pending_.shrink_to_fit();
    }
    if (!Passed(t_, direction_, n, ec) || read_failed_) {
      End();
      return;
    }
    Read();
  }

  void End() {
    chunk_.Release();
    t_.Stop();
    t_.Ended();
  }

  Tunnel& t_;
  AnyStream& from_;
  beast::flat_buffer& pending_;
  AnyStream& to_;
  RelayChunk chunk_;  // held while bytes pass
  TunnelDirection direction_;
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

}  // namespace
}  // namespace tollgate::gateway
