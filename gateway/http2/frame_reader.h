// FrameReader: what an HTTP/2 peer (a client, or an upstream) sent, read
// without a buffer of the connection's own. Single-threaded, as the
// connection that owns it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gateway/io/net.h"

namespace tollgate::gateway::http2_detail {

// An idle connection waits for its socket to become readable holding no
// buffer; each read goes into a buffer of the thread's, which the caller
// feeds to nghttp2 (which copies what it keeps) before it waits for
// anything: the next read, of any connection of the thread, reuses it.
class FrameReader {
 public:
  struct Piece {
    ErrorCode ec;  // end of stream: asio::error::eof (TLS: or stream_truncated)
    const std::uint8_t* data = nullptr;  // valid until the caller next waits
    std::size_t size = 0;
  };
  // The next bytes from `stream`, waiting without a deadline (the caller's
  // own timers bound what it waits for) only when the last read left
  // nothing behind. Reads at once first: a connection handed over may have
  // bytes waiting. One call at a time.
  Task<Piece> Next(AnyStream& stream);

 private:
  bool wait_ = false;   // the last read found the socket empty
  bool yield_ = false;  // the last read left more: other handlers first
};

}  // namespace tollgate::gateway::http2_detail
