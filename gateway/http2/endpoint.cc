#include "gateway/http2/endpoint.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "base/loop_time.h"
#include "gateway/http2/frame_io.h"
#include "gateway/io/linger.h"

namespace tollgate::gateway::http2_detail {

namespace {

// After the last frame, what the peer still sends is read and dropped for
// at most this long (and this much) before the socket is closed: closing
// with unread bytes makes the kernel send RST, which may destroy the
// GOAWAY before the peer has read it.
constexpr auto kLingerTime = std::chrono::seconds(1);
constexpr std::size_t kLingerBytes = 1 << 20;

}  // namespace

Endpoint::Endpoint(AnyStream& stream, const EndpointLimits& limits)
    : stream_(stream),
      executor_(Lowest(stream).get_executor()),
      limits_(limits),
      write_wake_(executor_),
      read_wake_(executor_),
      done_wake_(executor_),
      watchdog_(executor_) {}

Endpoint::~Endpoint() {
  if (session_ != nullptr) nghttp2_session_del(session_);
}

void Endpoint::StartLoops(const std::shared_ptr<void>& keeper) {
  Spawn(WriteLoop(), keeper);
  Spawn(WatchLoop(), keeper);
}

void Endpoint::Spawn(Task<void> task, const std::shared_ptr<void>& keeper) {
  ++tasks_;
  asio::co_spawn(executor_, std::move(task),
                 [this, keeper](const std::exception_ptr&) { TaskDone(); });
}

void Endpoint::TaskDone() {
  --tasks_;
  done_wake_.Notify();
}

void Endpoint::Pull() {
  if (fatal_ || dead_ || session_ == nullptr) return;
  if (const int error = PullFrames(session_, pending_, limits_.max_outbound_bytes)) {
    OnSessionError(error);
  }
}

void Endpoint::EndSession(std::uint32_t code) {
  if (terminating_) return;
  terminating_ = true;
  nghttp2_session_terminate_session(session_, code);
  Kick();
}

void Endpoint::ReleaseOutput() {
  if (pending_.empty()) std::string().swap(pending_);
  if (!writing_.empty()) return;
  std::string().swap(writing_);
  if (auto* tls = std::get_if<TlsStream>(&stream_)) tls->ReleaseBuffers();
}

void Endpoint::CloseSocket() {
  Lowest(stream_).close();
  write_wake_.Notify();
  read_wake_.Notify();
  watchdog_.cancel();
}

Endpoint::Clock::time_point Endpoint::Watch(Clock::time_point) { return Clock::time_point::max(); }

Task<void> Endpoint::ReadLoop() {
  ErrorCode ec;
  while (!dead_ && !finishing_ && !fatal_) {
    if (pending_.size() >= limits_.max_outbound_bytes) {
      // The peer does not take what we send: read nothing more from it
      // (the write's deadline ends this).
      co_await read_wake_.Wait(Clock::time_point::max());
      // A fresh reader reads before it waits: what arrived meanwhile raised
      // its (edge-triggered) event while no wait was there to take it.
      reader_ = FrameReader();
      continue;
    }
    // No deadline here: the watchdog closes an idle connection, and each
    // stream's operations have their own.
    const FrameReader::Piece piece = co_await reader_.Next(stream_);
    if (piece.ec) {
      ec = piece.ec;
      break;
    }
    Feed(piece.data, piece.size);
  }
  OnReaderEnd(ec);
  // After a fatal error the writer sends what is pending, then finishes.
  while (!dead_ && !finishing_) co_await read_wake_.Wait(Clock::time_point::max());
  if (finishing_ && !dead_) co_await Linger(Lowest(stream_), kLingerTime, kLingerBytes);
  OnClosed();
  while (tasks_ > 0) co_await done_wake_.Wait(Clock::time_point::max());
}

Task<void> Endpoint::WriteLoop() {
  WriterEnd end = WriterEnd::kStopped;
  while (!dead_) {
    Pull();
    if (dead_) break;
    if (pending_.empty()) {
      // Both sides' GOAWAY (or ours) and no stream left, or nghttp2 failed.
      if (fatal_ || session_ == nullptr ||
          (nghttp2_session_want_read(session_) == 0 && nghttp2_session_want_write(session_) == 0)) {
        end = WriterEnd::kFinished;
        break;
      }
      OnOutputIdle();
      co_await write_wake_.Wait(Clock::time_point::max());
      continue;
    }
    writing_.swap(pending_);
    const ErrorCode ec = co_await WriteFrames(stream_, writing_, limits_.write_timeout);
    writing_.clear();
    if (ec) {
      end = WriterEnd::kFailed;
      break;
    }
    read_wake_.Notify();
  }
  OnWriterEnd(end);
}

Task<void> Endpoint::WatchLoop() {
  while (!dead_) {
    const auto now = store::LoopNow();
    auto next = now + limits_.idle_timeout;
    if (!terminating_ && Idle()) {
      const auto idle_end = idle_since_ + limits_.idle_timeout;
      if (now >= idle_end) {
        OnIdleTimeout();
        // The writer closes the connection once the GOAWAY is sent.
        EndSession(NGHTTP2_NO_ERROR);
      } else {
        next = idle_end;
      }
    }
    next = std::min(next, Watch(now));
    watchdog_.expires_at(next);
    co_await watchdog_.async_wait(kUseTuple);
  }
}

}  // namespace tollgate::gateway::http2_detail
