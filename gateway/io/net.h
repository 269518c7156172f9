// The stream types of client and upstream connections, on top of
// gateway/io_types.h. Heavy: include only from gateway implementation files,
// never from headers that the rest of the project includes.
#pragma once

#include <variant>

#include "gateway/io/deadline_stream.h"
#include "gateway/io/io_types.h"
#include "gateway/io/tls_stream.h"

namespace tollgate::gateway {

using TcpStream = DeadlineStream;
// A client or upstream connection, plain or TLS. A TcpStream may be
// destroyed with operations pending (they complete with
// operation_aborted); a TlsStream, as Asio's SSL stream, may not.
using AnyStream = std::variant<TcpStream, TlsStream>;

inline TcpStream& Lowest(AnyStream& stream) {
  if (auto* plain = std::get_if<TcpStream>(&stream)) return *plain;
  return std::get<TlsStream>(stream).next_layer();
}

}  // namespace tollgate::gateway
