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
// --mode h2: cleartext HTTP/2 (prior knowledge) as --mode callback, plus
//   one nghttp2 server session per connection with tollgate's options and
//   settings (its HPACK tables, settings and windows are what an idle
//   HTTP/2 connection must keep); requests are answered 200 without a
//   body. The floor for h2c on nghttp2.
// Usage: idle_floor --listen 127.0.0.1:PORT [--mode callback|coroutine|h2]
#include <nghttp2/nghttp2.h>
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

// --mode callback's protocol: nothing kept per connection.
struct Http1 {
  bool Open(Socket&) { return true; }
  bool Serve(Socket& socket) { return tollgate::bench::Serve(socket); }
};

// --mode h2's: an nghttp2 server session as tollgate's server side makes
// it (gateway/http2/connection.cc), with its options and settings.
class Http2 {
 public:
  Http2() = default;
  Http2(const Http2&) = delete;
  Http2& operator=(const Http2&) = delete;
  ~Http2() { nghttp2_session_del(session_); }

  bool Open(Socket& socket) {
    fd_ = socket.native_handle();
    nghttp2_session_callbacks* callbacks = nullptr;
    nghttp2_session_callbacks_new(&callbacks);
    nghttp2_session_callbacks_set_send_callback(callbacks, &Http2::OnSend);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, &Http2::OnFrame);
    nghttp2_option* option = nullptr;
    nghttp2_option_new(&option);
    nghttp2_option_set_no_closed_streams(option, 1);
    nghttp2_option_set_max_deflate_dynamic_table_size(option, 1024);
    const int rv = nghttp2_session_server_new2(&session_, callbacks, this, option);
    nghttp2_option_del(option);
    nghttp2_session_callbacks_del(callbacks);
    if (rv != 0) return false;
    const nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 128},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 256 * 1024},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, 16 * 1024},
        {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
    };
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
    return nghttp2_session_send(session_) == 0;
  }

  // Reads what arrived into the thread's buffer and answers it; false when
  // the connection is done.
  bool Serve(Socket&) {
    for (;;) {
      const ssize_t n = ::recv(fd_, buffer.data(), buffer.size(), MSG_DONTWAIT);
      if (n == 0) return false;
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      if (nghttp2_session_mem_recv(session_, reinterpret_cast<const std::uint8_t*>(buffer.data()),
                                   static_cast<std::size_t>(n)) < 0 ||
          nghttp2_session_send(session_) != 0) {
        return false;
      }
    }
  }

 private:
  static ssize_t OnSend(nghttp2_session*, const std::uint8_t* data, std::size_t length, int,
                        void* self) {
    const ssize_t n =
        ::send(static_cast<Http2*>(self)->fd_, data, length, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) return errno == EAGAIN ? NGHTTP2_ERR_WOULDBLOCK : NGHTTP2_ERR_CALLBACK_FAILURE;
    return n;
  }

  static int OnFrame(nghttp2_session* session, const nghttp2_frame* frame, void*) {
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
      static const char kStatus[] = ":status";
      static const char kOk[] = "200";
      nghttp2_nv status{reinterpret_cast<std::uint8_t*>(const_cast<char*>(kStatus)),
                        reinterpret_cast<std::uint8_t*>(const_cast<char*>(kOk)), sizeof kStatus - 1,
                        sizeof kOk - 1, NGHTTP2_NV_FLAG_NONE};
      nghttp2_submit_response(session, frame->hd.stream_id, &status, 1, nullptr);
    }
    return 0;
  }

  int fd_ = -1;
  nghttp2_session* session_ = nullptr;
};

// --mode callback and --mode h2: the connection is an object with
// completion handlers (what an event-driven server in C, such as nginx,
// amounts to on Asio), serving `Protocol`.
template <class Protocol>
class Connection {
 public:
  explicit Connection(Socket socket) : socket_(std::move(socket)), idle_(socket_.get_executor()) {}
  static void Start(std::unique_ptr<Connection> self) {
    Connection* c = self.release();
    if (!c->protocol_.Open(c->socket_)) {
      delete c;
      return;
    }
    c->Wait();
  }

 private:
  void Wait() {
    idle_.expires_after(kIdle);
    idle_.async_wait([this](const ErrorCode& ec) {
      if (!ec) socket_.cancel();
    });
    socket_.async_wait(tcp::socket::wait_read, [this](const ErrorCode& ec) {
      if (ec || !protocol_.Serve(socket_)) {
        delete this;
        return;
      }
      idle_.cancel();
      Wait();
    });
  }

  Socket socket_;
  Timer idle_;
  [[no_unique_address]] Protocol protocol_;
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

enum class Mode { kCallback, kCoroutine, kHttp2 };

Task<void> Accept(Acceptor& acceptor, Mode mode) {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(kUseTuple);
    if (ec) continue;
    switch (mode) {
      case Mode::kCoroutine:
        asio::co_spawn(acceptor.get_executor(), Run(std::move(socket)), asio::detached);
        break;
      case Mode::kCallback:
        Connection<Http1>::Start(std::make_unique<Connection<Http1>>(std::move(socket)));
        break;
      case Mode::kHttp2:
        Connection<Http2>::Start(std::make_unique<Connection<Http2>>(std::move(socket)));
        break;
    }
  }
}

}  // namespace
}  // namespace tollgate::bench

int main(int argc, char** argv) {
  using namespace tollgate::bench;
  std::string listen;
  Mode mode = Mode::kCallback;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    const std::string_view value = argv[i + 1];
    if (flag == "--listen") listen = value;
    if (flag == "--mode") {
      mode = value == "coroutine" ? Mode::kCoroutine
             : value == "h2"      ? Mode::kHttp2
                                  : Mode::kCallback;
    }
  }
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos) {
    std::fprintf(stderr, "usage: idle_floor --listen HOST:PORT [--mode callback|coroutine|h2]\n");
    return 2;
  }
  asio::io_context io(1);
  Acceptor acceptor(io.get_executor(),
                    tcp::endpoint(asio::ip::make_address(listen.substr(0, colon)),
                                  static_cast<unsigned short>(std::stoi(listen.substr(colon + 1)))));
  acceptor.listen(4096);
  asio::co_spawn(io, Accept(acceptor, mode), asio::detached);
  io.run();
}
