// ws_echo: a WebSocket echo server for bench/websocket.sh. One thread, one
// epoll loop (Boost.Beast's websocket stream on Asio): every data message a
// client sends comes back as one message of the same kind (text or binary)
// and content. No timeouts, no compression, no logging: it must cost less
// per message than the proxies measured in front of it.
// Usage: ws_echo --listen 127.0.0.1:PORT
#include <string>
#include <utility>

#include "bench/ws_common.h"

namespace tollgate::bench {
namespace {

Task<void> Echo(Socket socket) {
  socket.set_option(tcp::no_delay(true));
  WebSocket ws(std::move(socket));
  ws.auto_fragment(false);
  if (auto [ec] = co_await ws.async_accept(kUseTuple); ec) co_return;
  beast::flat_buffer buffer;
  for (;;) {
    auto [read_ec, n] = co_await ws.async_read(buffer, kUseTuple);
    if (read_ec) break;
    ws.text(ws.got_text());
    auto [write_ec, written] = co_await ws.async_write(buffer.data(), kUseTuple);
    if (write_ec) break;
    buffer.consume(buffer.size());
  }
}

Task<void> Accept(Acceptor& acceptor) {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(kUseTuple);
    if (ec) continue;
    asio::co_spawn(acceptor.get_executor(), Echo(std::move(socket)), asio::detached);
  }
}

}  // namespace
}  // namespace tollgate::bench

int main(int argc, char** argv) {
  using namespace tollgate::bench;
  std::string listen;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string_view(argv[i]) == "--listen") listen = argv[i + 1];
  }
  if (listen.empty()) Die("usage: ws_echo --listen HOST:PORT");
  asio::io_context io(1);
  Acceptor acceptor(io.get_executor());
  const tcp::endpoint endpoint = ParseEndpoint(listen);
  acceptor.open(endpoint.protocol());
  acceptor.set_option(asio::socket_base::reuse_address(true));
  acceptor.bind(endpoint);
  acceptor.listen(asio::socket_base::max_listen_connections);
  asio::co_spawn(io.get_executor(), Accept(acceptor), asio::detached);
  io.run();
}
