#include "gateway/http2/frame_reader.h"

#include <sys/socket.h>

#include <boost/asio/post.hpp>
#include <memory>

#include "gateway/io/read_now.h"
#include "gateway/io/readable_wait.h"

namespace tollgate::gateway::http2_detail {

namespace {

// A read's worth: what one TLS record holds.
constexpr std::size_t kReadChunk = 16 * 1024;

asio::mutable_buffer ThreadReadBuffer() {
  thread_local const std::unique_ptr<std::uint8_t[]> buffer(new std::uint8_t[kReadChunk]);
  return asio::buffer(buffer.get(), kReadChunk);
}

}  // namespace

Task<FrameReader::Piece> FrameReader::Next(AnyStream& stream) {
  TcpStream& lowest = Lowest(stream);
  lowest.expires_never();
  for (;;) {
    if (wait_) {
      // Edge-triggered epoll: this wait starts only after a read that found
      // the socket empty, so whatever arrives since raises its event. Not
      // async_wait, which re-registers the socket each time (readable_wait.h).
      auto [ec, unused] =
          co_await lowest.socket().async_receive(ReadableWait(), ReadableWait::kFlags, kUseTuple);
      if (ec) co_return Piece{ec};
      wait_ = false;
    } else if (yield_) {
      yield_ = false;
      co_await asio::post(lowest.get_executor(), asio::use_awaitable_t<Executor>{});
    }
    const asio::mutable_buffer buffer = ThreadReadBuffer();
    ErrorCode ec;
    bool exhausted = false;
    const std::size_t n = ReadNow(stream, buffer, exhausted, ec);
    if (ec) co_return Piece{ec};
    wait_ = exhausted;
    yield_ = !exhausted;
    if (n > 0) co_return Piece{{}, static_cast<const std::uint8_t*>(buffer.data()), n};
  }
}

}  // namespace tollgate::gateway::http2_detail
