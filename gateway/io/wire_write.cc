#include "gateway/io/wire_write.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

namespace tollgate::gateway {

bool TryWriteWire(AnyStream& stream, std::string& wire, ErrorCode& ec) {
  if (auto* plain = std::get_if<TcpStream>(&stream)) {
    const std::size_t n = plain->TryWrite(asio::buffer(wire), ec);
    if (ec || n == wire.size()) return true;
    wire.erase(0, n);
    return false;
  }
  auto& tls = std::get<TlsStream>(stream);
  const std::size_t n = tls.TryWrite(asio::buffer(wire), ec);
  if (ec) return true;
  wire.erase(0, n);
  // WriteWireRest() sends what is left, the unsent records first (with
  // nothing left of `wire`, its empty write sends them).
  return wire.empty() && tls.unsent() == 0;
}

Task<ErrorCode> WriteWireRest(AnyStream& stream, const std::string& wire,
                              std::chrono::steady_clock::duration timeout) {
  Lowest(stream).expires_after(timeout);
  auto [ec, n] = co_await std::visit(
      [&](auto& s) { return asio::async_write(s, asio::buffer(wire), kUseTuple); }, stream);
  co_return ec;
}

bool EncryptLastOverTls(TlsStream& tls, std::string& wire) {
  if (wire.size() > kLastOverTls) return false;
  SSL* ssl = tls.native_handle();
  ERR_clear_error();
  const int n = SSL_write(ssl, wire.data(), static_cast<int>(wire.size()));
  if (n <= 0) {
    ERR_clear_error();
    return false;
  }
  wire.erase(0, static_cast<std::size_t>(n));
  return true;
}

}  // namespace tollgate::gateway
