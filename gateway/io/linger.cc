#include "gateway/io/linger.h"

#include <array>

namespace tollgate::gateway {

Task<void> Linger(TcpStream& tcp, std::chrono::milliseconds for_at_most, std::size_t max_bytes,
                  const bool* stop) {
  // What is read is dropped: the lingering connections of a thread share
  // one buffer (a thread runs one read at a time).
  thread_local std::array<char, 16 * 1024> discard;
  tcp.expires_after(for_at_most);
  std::size_t total = 0;
  while (total < max_bytes) {
    auto [ec, n] = co_await tcp.async_read_some(asio::buffer(discard), kUseTuple);
    if (ec || (stop != nullptr && *stop)) break;
    total += n;
  }
}

}  // namespace tollgate::gateway
