// Lingering close, as nginx's lingering_close: a connection that tollgate
// ends while the peer may still be sending (a request body left unread by
// a refusal, a WebSocket client that has not read the close frame yet, an
// HTTP/2 client after the last GOAWAY). A socket closed with bytes unread
// resets the connection, and a reset can destroy the answer before the peer
// has read it (a client that writes its whole body before reading; a
// segment lost and never sent again; stacks that drop what they received
// on a reset). So, once the answer and a FIN are sent, what still comes is
// read and dropped until the peer's end of stream. Heavy (Asio): include
// from implementation files only.
#pragma once

#include <chrono>
#include <cstddef>

#include "gateway/io/net.h"

namespace tollgate::gateway {

// Reads and drops what `tcp` receives until the peer's end of stream or an
// error, for at most `for_at_most` and `max_bytes` (the work a peer can
// make it do), or until `*stop` is true after a read (`stop` may be null).
// The bytes go to one discard buffer per thread and are read beneath TLS:
// the session is over. The caller has sent its FIN.
Task<void> Linger(TcpStream& tcp, std::chrono::milliseconds for_at_most, std::size_t max_bytes,
                  const bool* stop = nullptr);

}  // namespace tollgate::gateway
