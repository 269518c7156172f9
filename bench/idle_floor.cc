// idle_floor: the least memory an idle keep-alive HTTP/1.1 connection can
// cost a server on Asio's epoll reactor, for bench/idle_memory.sh's
// "floor" rows beside tollgate and nginx (issue 48). It answers every
// request with a fixed 200 and keeps the connection; per connection it
// holds only the socket (Asio's reactor record included), an idle timer,
// and one pending wait for readability with no buffer; requests are read
// into one buffer of the thread's. No parsing beyond the end of the head,
// no timeouts but the idle one, no logging: not a server, a measurement.
//
// --mode callback: the connection is an object with completion handlers
//   (what an event-driven server in C, such as nginx, amounts to on Asio).
// --mode coroutine: one C++20 coroutine per connection (co_spawn), as
//   tollgate's connections are, waiting in the same way.
// Usage: idle_floor --listen 127.0.0.1:PORT [--mode callback|coroutine]
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "bench/ws_common.h"

namespace tollgate::bench {
namespace {

constexpr std::string_view kResponse =
    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok";
constexpr std::chrono::seconds kIdle{300};

// The thread's one read buffer.
std::array<char, 16 * 1024> buffer;

// Reads what arrived and answers each complete head in it; false when the
// connection is done (end of stream, error). A head split across reads is
// not handled: idle_clients.py sends each request in one write.
bool Serve(Socket& socket) {
  for (;;) {
    const ssize_t n = ::recv(socket.native_handle(), buffer.data(), buffer.size(), MSG_DONTWAIT);
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    std::string_view got(buffer.data(), static_cast<std::size_t>(n));
    for (std::size_t at = got.find("\r\n\r\n"); at != std::string_view::npos;
         at = got.find("\r\n\r\n", at + 4)) {
      if (::send(socket.native_handle(), kResponse.data(), kResponse.size(), MSG_NOSIGNAL) < 0) {
        return false;
      }
    }
  }
}

// --mode callback.
class Connection {
 public:
  explicit Connection(Socket socket) : socket_(std::move(socket)), idle_(socket_.get_executor()) {}
  static void Start(std::unique_ptr<Connection> self) {
    Connection* c = self.release();
    c->Wait();
  }

 private:
  void Wait() {
    idle_.expires_after(kIdle);
    idle_.async_wait([this](const ErrorCode& ec) {
      if (!ec) socket_.cancel();
    });
    socket_.async_wait(tcp::socket::wait_read, [this](const ErrorCode& ec) {
      if (ec || !Serve(socket_)) {
        delete this;
        return;
      }
      idle_.cancel();
      Wait();
    });
  }

  Socket socket_;
  Timer idle_;
};

// --mode coroutine.
Task<void> Run(Socket socket) {
  Timer idle(socket.get_executor());
  for (;;) {
    idle.expires_after(kIdle);
    idle.async_wait([&socket](const ErrorCode& ec) {
      if (!ec) socket.cancel();
    });
    auto [ec] = co_await socket.async_wait(tcp::socket::wait_read, kUseTuple);
    idle.cancel();
    if (ec || !Serve(socket)) co_return;
  }
}

Task<void> Accept(Acceptor& acceptor, bool coroutine) {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(kUseTuple);
    if (ec) continue;
    if (coroutine) {
      asio::co_spawn(acceptor.get_executor(), Run(std::move(socket)), asio::detached);
    } else {
      Connection::Start(std::make_unique<Connection>(std::move(socket)));
    }
  }
}

}  // namespace
}  // namespace tollgate::bench

int main(int argc, char** argv) {
  using namespace tollgate::bench;
  std::string listen;
  bool coroutine = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    if (flag == "--listen") listen = argv[i + 1];
    if (flag == "--mode") coroutine = std::string_view(argv[i + 1]) == "coroutine";
  }
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos) {
    std::fprintf(stderr, "usage: idle_floor --listen HOST:PORT [--mode callback|coroutine]\n");
    return 2;
  }
  asio::io_context io(1);
  Acceptor acceptor(io.get_executor(),
                    tcp::endpoint(asio::ip::make_address(listen.substr(0, colon)),
                                  static_cast<unsigned short>(std::stoi(listen.substr(colon + 1)))));
  acceptor.listen(4096);
  asio::co_spawn(io, Accept(acceptor, coroutine), asio::detached);
  io.run();
}
