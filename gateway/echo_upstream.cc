#include "gateway/echo_upstream.h"

#include <sys/socket.h>

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <charconv>
#include <thread>
#include <vector>

#include "gateway/listen.h"
#include "gateway/net.h"

namespace tollgate::gateway {
namespace {

constexpr std::size_t kChunk = 16 * 1024;

std::uint64_t Number(std::string_view text) {
  std::uint64_t n = 0;
  std::from_chars(text.data(), text.data() + text.size(), n);
  return n;
}

class Connection {
 public:
  Connection(TcpSocket socket, std::uint16_t port) : stream_(std::move(socket)), port_(port) {}

  Task<void> Run() {
    for (;;) {
      http::request_parser<http::empty_body> head;
      head.body_limit(boost::none);
      head.header_limit(64 * 1024);
      stream_.expires_after(std::chrono::seconds(60));
      auto [ec, n] = co_await http::async_read_header(stream_, buffer_, head, kUseTuple);
      if (ec) break;
      ++requests_;
      const bool keep = co_await Respond(head);
      if (!keep) break;
    }
    ErrorCode ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

 private:
  template <typename Body>
  void Common(http::response<Body>& res, bool keep_alive) {
    res.set(http::field::server, "tollgate-echo");
    res.set("X-Upstream-Port", std::to_string(port_));
    res.set("X-Upstream-Request", std::to_string(requests_));
    res.keep_alive(keep_alive);
  }

  Task<bool> Respond(http::request_parser<http::empty_body>& head) {
    const std::string target(head.get().target());
    const std::string_view path = std::string_view(target).substr(0, target.find('?'));
    const bool chunked = target.find("chunked") != std::string::npos;
    const bool keep_alive = head.get().keep_alive();
    const bool head_request = head.get().method() == http::verb::head;
    if (path == "/_test/echo") co_return co_await Echo(head);
    http::response<http::string_body> res{http::status::ok, 11};
    Common(res, keep_alive);
    if (path == "/_test/headers") {
      boost::json::object fields;
      for (const auto& f : head.get()) {
        std::string name(f.name_string());
        auto it = fields.find(name);
        if (it == fields.end()) {
          fields[name] = f.value();
        } else {
          it->value() = std::string(it->value().as_string()) + "," + std::string(f.value());
        }
      }
      res.set(http::field::content_type, "application/json");
      res.body() = boost::json::serialize(fields);
    }
    std::uint64_t received = 0;
    if (!co_await DiscardBody(head, received)) co_return false;
    if (path == "/_test/count") res.body() = std::to_string(received) + "\n";
    if (path.rfind("/_test/bytes/", 0) == 0) {
      co_return co_await Bytes(keep_alive, Number(path.substr(13)), chunked);
    }
    res.set(http::field::content_type, "text/plain");
    bool keep = res.keep_alive();
    if (path.rfind("/_test/status/", 0) == 0) {
      res.result(static_cast<unsigned>(Number(path.substr(14))));
      res.body() = "status\n";
    } else if (path.rfind("/_test/sleep/", 0) == 0) {
      asio::steady_timer timer(co_await asio::this_coro::executor,
                               std::chrono::milliseconds(Number(path.substr(13))));
      co_await timer.async_wait(kUseTuple);
      res.body() = "slept\n";
    } else if (path == "/_test/headers") {
      // The body was filled in before the request body was consumed.
    } else if (path == "/_test/close") {
      keep = false;
      res.keep_alive(false);
      res.body() = "bye\n";
    } else if (path != "/_test/count") {
      res.body() = "hello from upstream\n";
    }
    const unsigned status = res.result_int();
    if (status == 204 || status == 304 || status < 200) res.body().clear();
    res.prepare_payload();
    stream_.expires_after(std::chrono::seconds(60));
    if (head_request) {
      // The header announces the body's length; the body itself is not sent.
      http::response<http::empty_body> header_only{std::move(res.base())};
      auto [ec, n] = co_await http::async_write(stream_, header_only, kUseTuple);
      co_return !ec && keep;
    }
    auto [ec, n] = co_await http::async_write(stream_, res, kUseTuple);
    co_return !ec && keep;
  }

  Task<bool> DiscardBody(http::request_parser<http::empty_body>& head, std::uint64_t& received) {
    if (head.is_done()) co_return true;
    http::request_parser<http::buffer_body> body{std::move(head)};
    char scratch[kChunk];
    while (!body.is_done()) {
      body.get().body().data = scratch;
      body.get().body().size = sizeof(scratch);
      stream_.expires_after(std::chrono::seconds(60));
      auto [ec, n] = co_await http::async_read_some(stream_, buffer_, body, kUseTuple);
      if (ec && ec != http::error::need_buffer) co_return false;
      received += sizeof(scratch) - body.get().body().size;
    }
    co_return true;
  }

  Task<bool> Bytes(bool keep_alive, std::uint64_t total, bool chunked) {
    http::response<http::buffer_body> res{http::status::ok, 11};
    Common(res, keep_alive);
    res.set(http::field::content_type, "application/octet-stream");
    if (chunked) {
      res.chunked(true);
    } else {
      res.content_length(total);
    }
    std::vector<char> block(kChunk, 'x');
    res.body().data = nullptr;
    res.body().more = true;
    http::response_serializer<http::buffer_body> sr{res};
    auto [hec, hn] = co_await http::async_write_header(stream_, sr, kUseTuple);
    if (hec) co_return false;
    std::uint64_t sent = 0;
    while (sent < total) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, total - sent));
      res.body().data = block.data();
      res.body().size = n;
      res.body().more = sent + n < total;
      stream_.expires_after(std::chrono::seconds(60));
      auto [ec, wn] = co_await http::async_write(stream_, sr, kUseTuple);
      if (ec && ec != http::error::need_buffer) co_return false;
      sent += n;
    }
    if (!sr.is_done()) {
      res.body().data = nullptr;
      res.body().size = 0;
      res.body().more = false;
      auto [ec, wn] = co_await http::async_write(stream_, sr, kUseTuple);
      if (ec && ec != http::error::need_buffer) co_return false;
    }
    co_return res.keep_alive();
  }

  Task<bool> Echo(http::request_parser<http::empty_body>& head) {
    http::response<http::buffer_body> res{http::status::ok, 11};
    Common(res, head.get().keep_alive());
    res.set(http::field::content_type, "application/octet-stream");
    const bool keep = res.keep_alive();
    if (head.content_length()) {
      res.content_length(*head.content_length());
    } else {
      res.chunked(true);
    }
    http::request_parser<http::buffer_body> body{std::move(head)};
    res.body().data = nullptr;
    res.body().more = true;
    http::response_serializer<http::buffer_body> sr{res};
    auto [hec, hn] = co_await http::async_write_header(stream_, sr, kUseTuple);
    if (hec) co_return false;
    char scratch[kChunk];
    do {
      if (!body.is_done()) {
        body.get().body().data = scratch;
        body.get().body().size = sizeof(scratch);
        stream_.expires_after(std::chrono::seconds(60));
        auto [ec, n] = co_await http::async_read_some(stream_, buffer_, body, kUseTuple);
        if (ec && ec != http::error::need_buffer) co_return false;
        res.body().size = sizeof(scratch) - body.get().body().size;
        // Zero bytes with a buffer would be serialized as the last chunk.
        res.body().data = res.body().size > 0 ? scratch : nullptr;
        res.body().more = !body.is_done();
      } else {
        res.body().data = nullptr;
        res.body().size = 0;
        res.body().more = false;
      }
      auto [ec, n] = co_await http::async_write(stream_, sr, kUseTuple);
      if (ec && ec != http::error::need_buffer) co_return false;
    } while (!body.is_done() || !sr.is_done());
    co_return keep;
  }

  TcpStream stream_;
  beast::flat_buffer buffer_;
  std::uint16_t port_;
  std::uint64_t requests_ = 0;  // on this connection
};

Task<void> RunConnection(std::unique_ptr<Connection> c) { co_await c->Run(); }

Task<void> AcceptLoop(Acceptor& acceptor) {
  const std::uint16_t port = acceptor.local_endpoint().port();
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(kUseTuple);
    if (ec) {
      if (!acceptor.is_open()) co_return;
      continue;
    }
    ErrorCode ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    asio::co_spawn(acceptor.get_executor(),
                   RunConnection(std::make_unique<Connection>(std::move(socket), port)),
                   asio::detached);
  }
}

}  // namespace

struct EchoUpstream::Impl {
  std::vector<std::unique_ptr<asio::io_context>> ios;
  std::vector<std::unique_ptr<Acceptor>> acceptors;
  std::vector<std::thread> threads;
};

EchoUpstream::EchoUpstream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EchoUpstream::~EchoUpstream() {
  Stop();
  Wait();
}

std::unique_ptr<EchoUpstream> EchoUpstream::Create(const std::string& host, std::uint16_t port,
                                                   int threads, std::string& error) {
  auto impl = std::make_unique<Impl>();
  ErrorCode ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) {
    error = "echo upstream: \"" + host + "\" is not an IP address";
    return nullptr;
  }
  tcp::endpoint endpoint(address, port);
  for (int i = 0; i < std::max(1, threads); ++i) {
    impl->ios.push_back(std::make_unique<asio::io_context>(1));
    auto acceptor = ListenReusePort(*impl->ios.back(), endpoint, error);
    if (!acceptor) {
      error = "echo upstream: " + error;
      return nullptr;
    }
    endpoint.port(acceptor->local_endpoint().port());
    impl->acceptors.push_back(std::move(acceptor));
  }
  return std::unique_ptr<EchoUpstream>(new EchoUpstream(std::move(impl)));
}

void EchoUpstream::Start() {
  for (std::size_t i = 0; i < impl_->ios.size(); ++i) {
    asio::co_spawn(*impl_->ios[i], AcceptLoop(*impl_->acceptors[i]), asio::detached);
    impl_->threads.emplace_back([io = impl_->ios[i].get()] { io->run(); });
  }
}

void EchoUpstream::Stop() {
  for (auto& io : impl_->ios) io->stop();
}

void EchoUpstream::Wait() {
  for (auto& t : impl_->threads) {
    if (t.joinable()) t.join();
  }
}

std::uint16_t EchoUpstream::port() const {
  return impl_->acceptors.front()->local_endpoint().port();
}

}  // namespace tollgate::gateway
