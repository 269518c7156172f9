#include "gateway/io/listen.h"

#include <fmt/format.h>
#include <sys/socket.h>

namespace tollgate::gateway {

std::unique_ptr<Acceptor> ListenReusePort(asio::io_context& io, const tcp::endpoint& endpoint,
                                          std::string& error) {
  using ReusePort = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;
  auto acceptor = std::make_unique<Acceptor>(io);
  ErrorCode ec;
  acceptor->open(endpoint.protocol(), ec);
  if (!ec) acceptor->set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor->set_option(ReusePort(true), ec);
  if (!ec) acceptor->bind(endpoint, ec);
  if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    error = fmt::format("cannot listen on {}:{}: {}", endpoint.address().to_string(),
                        endpoint.port(), ec.message());
    return nullptr;
  }
  return acceptor;
}

}  // namespace tollgate::gateway
