// Http1Connection between requests (gateway/http1/connection.h): giving
// back what an exchange used, waiting for the next request's first bytes,
// and watching the client of a request that admit holds.
#include <sys/socket.h>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <cerrno>
#include <new>

#include "gateway/http1/connection.h"
#include "gateway/io/read_now.h"

namespace tollgate::gateway {

void Http1Connection::Rest() {
  // Called only when the request buffer holds nothing (no pipelined
  // request is dropped).
  relay_buffer_.Release();
  if (work_) GiveBackExchangeWork(std::move(work_));
  if (auto* tls = std::get_if<TlsStream>(&stream_)) tls->ReleaseBuffers();
}

bool Http1Connection::SweepIdle() {
  // Idle in its coroutine since the last sweep (not parked, not closing):
  // the wait is cancelled, and Run() parks the connection.
  if (!idle_ || parked_ || closing_ || park_) return false;
  if (!idle_swept_) {
    idle_swept_ = true;
    return false;
  }
  park_ = true;
  Lowest(stream_).cancel();
  return true;
}

void Http1Connection::AwaitRequest(std::unique_ptr<Http1Connection> self) {
  Http1Connection& c = *self;
  c.parked_ = true;
  Lowest(c.stream_).async_wait_readable(
      [self = std::move(self)](ErrorCode ec, std::size_t) mutable {
        // Out of memory for the next request's Work or coroutine: the
        // connection is dropped, not the process (as the coroutine's
        // detached completion would have it).
        try {
          Resume(std::move(self), ec);
        } catch (const std::bad_alloc&) {
        }
      });
}

void Http1Connection::Resume(std::unique_ptr<Http1Connection> self, ErrorCode ec) {
  Http1Connection& c = *self;
  if (!c.WaitEnded(ec)) return AwaitRequest(std::move(self));
  c.EndIdle();
  // Closed, idle timeout or drain: nothing to answer, and the
  // connection goes with this handler.
  if (ec) return;
  asio::co_spawn(c.worker_.io(), c.Run(std::move(self)), asio::detached);
}

bool Http1Connection::WaitEnded(ErrorCode& ec) {
  if (ec || ReadRequestStart(ec)) return true;
  // CloseIfIdle (drain, or room for a new client) cancels a pending wait;
  // one that came while this wait's completion was queued found none to
  // cancel.
  if (!closing_ && !worker_.draining()) return false;
  ec = asio::error::operation_aborted;
  return true;
}

void Http1Connection::EndIdle() {
  parked_ = false;
  idle_ = false;
  closing_ = false;
}

bool Http1Connection::ReadRequestStart(ErrorCode& ec) {
  if (gateway::ReadRequestStart(stream_, work_, worker_.services(),
                                static_cast<std::size_t>(config_->limits.max_header_bytes), ec)) {
    return true;
  }
  Rest();  // wait again without the buffer
  return false;
}

Task<ClientWatch::Held> Http1Connection::Hold(Timer& timer) {
  using namespace asio::experimental::awaitable_operators;
  for (;;) {
    auto first = co_await (timer.async_wait(kUseTuple) ||
                           Lowest(stream_).socket().async_wait(tcp::socket::wait_read, kUseTuple));
    if (first.index() == 0) co_return Held::kElapsed;
    char byte;
    const ssize_t n =
        ::recv(Lowest(stream_).socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      co_return Held::kClientGone;
    }
    if (n > 0) break;
    // Nothing there: an event the reactor collected after the request was
    // read (edge-triggered epoll reports arrivals, not what is left). Watch
    // again for the rest of the wait.
  }
  // Data (a pipelined request): it waits in the socket; keep our turn.
  co_await timer.async_wait(kUseTuple);
  co_return Held::kElapsed;
}

}  // namespace tollgate::gateway
