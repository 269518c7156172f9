// Listening sockets. A listener's address is bound once per I/O thread with
// SO_REUSEPORT, so that each thread's io_context accepts on its own socket
// and the kernel spreads connections over them; but SO_REUSEPORT would also
// let a second process of the same user bind the address and take half of
// the connections unseen. So the first socket of an address is bound only
// when the address is free, as nginx refuses to start on an address in use.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gateway/io/net.h"

namespace tollgate::gateway {

enum class Listening : std::uint8_t {
  // The address alone: no other socket may share it (the admin listener).
  kExclusive,
  // The first of several threads' sockets on the address: refused when
  // anything else listens there already, then bound with SO_REUSEPORT.
  kFirstOfThreads,
  // A further thread's socket on an address bound kFirstOfThreads.
  kAnotherThread,
};

// nullptr with `error` ("cannot listen on host:port: reason") on failure.
std::unique_ptr<Acceptor> Listen(asio::io_context& io, const tcp::endpoint& endpoint,
                                 Listening listening, std::string& error);

}  // namespace tollgate::gateway
