// Asio/Beast names and the stream type shared by the gateway's .cc files.
// Heavy: include only from gateway implementation files, never from headers
// that the rest of the project includes.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <variant>

namespace tollgate::gateway {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using ErrorCode = boost::system::error_code;

using TlsStream = beast::ssl_stream<beast::tcp_stream>;
// A client or upstream connection, plain or TLS.
using AnyStream = std::variant<beast::tcp_stream, TlsStream>;

// Completion token for request-path code: errors come back as values.
inline constexpr auto kUseTuple = asio::as_tuple(asio::use_awaitable);

inline beast::tcp_stream& Lowest(AnyStream& stream) {
  if (auto* plain = std::get_if<beast::tcp_stream>(&stream)) return *plain;
  return beast::get_lowest_layer(std::get<TlsStream>(stream));
}

inline std::chrono::milliseconds Ms(std::int64_t ms) { return std::chrono::milliseconds(ms); }

}  // namespace tollgate::gateway
