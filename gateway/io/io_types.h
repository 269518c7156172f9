// Asio/Beast names and the basic I/O types shared by the gateway's .cc files.
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
#include <chrono>

#include "gateway/io/field_pool.h"

namespace tollgate::gateway {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using ErrorCode = boost::system::error_code;

// Every I/O object names its io_context's executor type rather than the
// polymorphic any_io_executor: no type-erased executor copies per operation.
using Executor = asio::io_context::executor_type;
template <typename T>
using Task = asio::awaitable<T, Executor>;
using TcpSocket = asio::basic_stream_socket<tcp, Executor>;
using Acceptor = asio::basic_socket_acceptor<tcp, Executor>;
using Timer = asio::basic_waitable_timer<std::chrono::steady_clock,
                                         asio::wait_traits<std::chrono::steady_clock>, Executor>;

// The header fields of the requests and responses that pass through, and
// their parsers (field_pool.h says why they have their own allocator).
using FieldAlloc = FieldAllocator<char>;
using Fields = http::basic_fields<FieldAlloc>;
template <typename Body>
using RequestParser = http::request_parser<Body, FieldAlloc>;
template <typename Body>
using ResponseParser = http::response_parser<Body, FieldAlloc>;

// Completion token for request-path code: errors come back as values.
inline constexpr auto kUseTuple = asio::as_tuple(asio::use_awaitable_t<Executor>{});

inline std::chrono::milliseconds Ms(std::int64_t ms) { return std::chrono::milliseconds(ms); }

}  // namespace tollgate::gateway
