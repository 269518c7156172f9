// Http1Connection between requests (gateway/http1/connection.h): giving
// back what an exchange used, waiting for the next request's first bytes,
// and watching the client of a request that admit holds.
#include <sys/socket.h>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <cerrno>

#include "gateway/http1/connection.h"
#include "gateway/io/read_now.h"

namespace tollgate::gateway {

void Http1Connection::Rest() {
  // Nothing pipelined waits in the request buffer (the HTTP/2 handover
  // copied out the preface bytes it holds).
  relay_buffer_.Release();
  if (work_) GiveBackExchangeWork(std::move(work_));
  if (auto* tls = std::get_if<TlsStream>(&stream_)) tls->ReleaseBuffers();
}

bool Http1Connection::ReadRequestStart(ErrorCode& ec) {
  if (!work_) {
    work_ = TakeExchangeWork(worker_.services());
    work_->buffer.max_size(static_cast<std::size_t>(config_->limits.max_header_bytes) +
                           kRelayChunk);
  }
  // Beast sizes each later read by the buffer's spare capacity (at least
  // 512 bytes): without room, a streamed body would arrive in tiny reads.
  work_->buffer.reserve(kRelayChunk);
  bool exhausted = false;
  const std::size_t n = ReadNow(stream_, work_->buffer.prepare(kRelayChunk), exhausted, ec);
  if (ec) return true;
  if (n > 0) {
    work_->buffer.commit(n);
    return true;
  }
  // Nothing after all (an event older than the last read that drained the
  // socket, or a TLS record with no request bytes yet): wait again, without
  // the buffer.
  Rest();
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
