#include "gateway/io/deadline_stream.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "gateway/io/plain_syscall.h"

namespace tollgate::gateway::deadline_detail {

void State::ExpiresAt(Clock::time_point t) {
  for (int d = kRead; d <= kWrite; ++d) {
    if (pending_[d]) continue;
    deadline_[d] = t;
    expired_[d] = false;
  }
  if (t != Clock::time_point::max()) Watch(t);
}

void State::Begin(Direction direction) {
  pending_[direction] = true;
  if (expired_[direction]) {
    expired_[direction] = false;
    timed_out_[direction] = true;
    TimeOut(direction);
  }
}

void State::TimeOut(Direction direction) {
  if (direction == kWrite) {
    Close();  // as basic_stream does: pending operations fail, the stream is done
    return;
  }
  // A read that timed out ends receiving only: the pending read sees the end
  // of the stream (reported as a timeout), and the stream can still write
  // the answer to it (408 to a client too slow to send its request).
  ErrorCode ignored;
  socket.shutdown(TcpSocket::shutdown_receive, ignored);
}

void State::Finish(Direction direction, ErrorCode& ec) {
  pending_[direction] = false;
  if (timed_out_[direction]) {
    timed_out_[direction] = false;
    ec = beast::error::timeout;
  }
}

void State::Close() {
  ErrorCode ignored;
  socket.close(ignored);
  timer.cancel();
  armed_at_ = Clock::time_point::max();
  ++generation_;
}

std::size_t State::TryWrite(asio::const_buffer buffer, ErrorCode& ec) {
  for (;;) {
    const ssize_t n = PlainSend(socket.native_handle(), buffer.data(), buffer.size(),
                                MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      ec = ErrorCode(errno, asio::error::get_system_category());
    }
    return 0;
  }
}

// The wait is moved only to an earlier time; one that fires early (its
// deadline was pushed back meanwhile) waits again for the new deadline.
void State::Watch(Clock::time_point t) {
  if (t >= armed_at_) return;
  armed_at_ = t;
  timer.expires_at(t);  // an earlier wait completes with operation_aborted
  timer.async_wait([self = shared_from_this(), generation = ++generation_](const ErrorCode& ec) {
    self->OnWatch(generation, ec);
  });
}

void State::OnWatch(std::uint64_t generation, const ErrorCode& ec) {
  if (generation != generation_) return;  // superseded, or closed
  armed_at_ = Clock::time_point::max();
  if (ec) return;
  const Clock::time_point now = store::LoopNow();
  Clock::time_point next = Clock::time_point::max();
  bool timed_out[2] = {false, false};
  for (int d = kRead; d <= kWrite; ++d) {
    if (deadline_[d] > now) {
      next = std::min(next, deadline_[d]);
      continue;
    }
    deadline_[d] = Clock::time_point::max();
    if (pending_[d]) {
      timed_out_[d] = true;
      timed_out[d] = true;
    } else {
      expired_[d] = true;
    }
  }
  if (timed_out[kWrite]) {
    TimeOut(kWrite);
    return;
  }
  if (timed_out[kRead]) TimeOut(kRead);
  if (next != Clock::time_point::max()) Watch(next);
}

}  // namespace tollgate::gateway::deadline_detail
