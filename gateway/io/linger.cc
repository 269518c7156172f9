#include "gateway/io/linger.h"

namespace tollgate::gateway {

Task<void> Linger(TcpStream& tcp, asio::mutable_buffer scratch,
                  std::chrono::milliseconds for_at_most, std::size_t max_bytes,
                  const bool* stop) {
  tcp.expires_after(for_at_most);
  std::size_t total = 0;
  while (total < max_bytes) {
    auto [ec, n] = co_await tcp.async_read_some(scratch, kUseTuple);
    if (ec || (stop != nullptr && *stop)) break;
    total += n;
  }
}

}  // namespace tollgate::gateway
