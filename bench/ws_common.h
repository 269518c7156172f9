// What bench/ws_echo.cc and bench/ws_load.cc share: Asio and Beast names,
// single-threaded I/O types (the io_context's own executor, no type-erased
// executor copies per operation) and "host:port" parsing.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace tollgate::bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using ErrorCode = boost::system::error_code;

using Executor = asio::io_context::executor_type;
template <typename T>
using Task = asio::awaitable<T, Executor>;
using Socket = asio::basic_stream_socket<tcp, Executor>;
using Acceptor = asio::basic_socket_acceptor<tcp, Executor>;
using Timer = asio::basic_waitable_timer<std::chrono::steady_clock,
                                         asio::wait_traits<std::chrono::steady_clock>, Executor>;
using WebSocket = websocket::stream<Socket>;

// Completion token: errors come back as values.
inline constexpr auto kUseTuple = asio::as_tuple(asio::use_awaitable_t<Executor>{});

[[noreturn]] inline void Die(std::string_view message) {
  std::fprintf(stderr, "%.*s\n", static_cast<int>(message.size()), message.data());
  std::exit(2);
}

// "127.0.0.1:8080" (an IPv4 or bracketless IPv6 address before the last colon).
inline tcp::endpoint ParseEndpoint(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) Die("expected host:port, got " + std::string(text));
  ErrorCode ec;
  const auto address = asio::ip::make_address(std::string(text.substr(0, colon)), ec);
  if (ec) Die("bad address in " + std::string(text));
  const int port = std::atoi(std::string(text.substr(colon + 1)).c_str());
  if (port < 0 || port > 65535) Die("bad port in " + std::string(text));
  return tcp::endpoint(address, static_cast<unsigned short>(port));
}

}  // namespace tollgate::bench
