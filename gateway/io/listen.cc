#include "gateway/io/listen.h"

#include <fmt/format.h>
#include <sys/socket.h>

namespace tollgate::gateway {
namespace {

using ReusePort = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

// Whether a socket without SO_REUSEPORT can bind `endpoint`: not when any
// socket listens on it (another process's, or this configuration's own on
// an overlapping address), whatever options that one set. SO_REUSEADDR
// lets the probe past connections of an earlier process in TIME_WAIT.
// Port 0 is always free: each bind of it gets a port of its own.
ErrorCode ProbeFree(asio::io_context& io, const tcp::endpoint& endpoint) {
  ErrorCode ec;
  if (endpoint.port() == 0) return ec;
  tcp::acceptor probe(io);
  probe.open(endpoint.protocol(), ec);
  if (!ec) probe.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) probe.bind(endpoint, ec);
  return ec;
}

}  // namespace

std::unique_ptr<Acceptor> Listen(asio::io_context& io, const tcp::endpoint& endpoint,
                                 Listening listening, std::string& error) {
  auto acceptor = std::make_unique<Acceptor>(io);
  ErrorCode ec;
  if (listening == Listening::kFirstOfThreads) ec = ProbeFree(io, endpoint);
  if (!ec) acceptor->open(endpoint.protocol(), ec);
  if (!ec) acceptor->set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec && listening != Listening::kExclusive) acceptor->set_option(ReusePort(true), ec);
  if (!ec) acceptor->bind(endpoint, ec);
  if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    error = fmt::format("cannot listen on {}:{}: {}", endpoint.address().to_string(),
                        endpoint.port(), ec.message());
    if (ec == asio::error::address_in_use) {
      error += " (another process listens there, or the configuration names it twice)";
    }
    return nullptr;
  }
  return acceptor;
}

}  // namespace tollgate::gateway
