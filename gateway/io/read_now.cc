#include "gateway/io/read_now.h"

#include <sys/socket.h>

#include "gateway/io/draining_read.h"
#include "gateway/io/socket_internals.h"

namespace tollgate::gateway {

std::size_t ReadNow(AnyStream& stream, asio::mutable_buffer buffer, bool& exhausted,
                    ErrorCode& ec) {
  TcpSocket& socket = Lowest(stream).socket();
  std::size_t bytes = 0;
  if (auto* tls = std::get_if<TlsStream>(&stream)) {
    bytes = tls->TryRead(buffer, ec, exhausted);
  } else {
    int queued = -1;
    if (!draining_detail::Receive(socket.native_handle(), buffer, MSG_DONTWAIT, ec, bytes,
                                  queued)) {
      exhausted = true;
      bytes = 0;
    } else {
      // Without TCP_INQ's answer (queued -1) the next read is tried first.
      exhausted = queued == 0;
      if (ec) bytes = 0;
    }
  }
  if (!ec) NoteReadOutcome(socket, exhausted);
  return bytes;
}

void NoteHeldBytes(AnyStream& stream) {
  auto* tls = std::get_if<TlsStream>(&stream);
  if (tls != nullptr && SSL_has_pending(tls->native_handle()) != 0) {
    NoteReadOutcome(Lowest(stream).socket(), false);
  }
}

}  // namespace tollgate::gateway
