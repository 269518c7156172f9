// The stream types of client and upstream connections, on top of
// gateway/io_types.h. Heavy: include only from gateway implementation files,
// never from headers that the rest of the project includes.
#pragma once

#include <variant>

#include "gateway/io/deadline_stream.h"
#include "gateway/io/io_types.h"

namespace tollgate::gateway {

using TcpStream = DeadlineStream;
using TlsStream = beast::ssl_stream<TcpStream>;
// A client or upstream connection, plain or TLS.
using AnyStream = std::variant<TcpStream, TlsStream>;

inline TcpStream& Lowest(AnyStream& stream) {
  if (auto* plain = std::get_if<TcpStream>(&stream)) return *plain;
  return beast::get_lowest_layer(std::get<TlsStream>(stream));
}

}  // namespace tollgate::gateway
