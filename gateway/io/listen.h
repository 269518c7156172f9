// Listening sockets shared by every I/O thread: SO_REUSEPORT lets each
// thread's io_context accept on its own socket for the same address, and the
// kernel spreads connections over them.
#pragma once

#include <memory>
#include <string>

#include "gateway/io/net.h"

namespace tollgate::gateway {

// nullptr with `error` ("cannot listen on host:port: reason") on failure.
std::unique_ptr<Acceptor> ListenReusePort(asio::io_context& io, const tcp::endpoint& endpoint,
                                          std::string& error);

}  // namespace tollgate::gateway
