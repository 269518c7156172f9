// Upstream selection: round-robin over servers and passive health.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_support.h"

namespace tollgate::testing {
namespace {

namespace asio = boost::asio;

std::uint16_t DeadPort() {
  asio::io_context io;
  asio::ip::tcp::acceptor a(io, {asio::ip::make_address("127.0.0.1"), 0});
  return a.local_endpoint().port();
}

// `upstream_keys` go into the [[upstreams]] table.
std::string TwoServers(std::uint16_t a, std::uint16_t b, const std::string& upstream_keys = "") {
  std::string config = BasicConfig();
  config.replace(config.find("servers = [\"127.0.0.1:{ECHO}\"]"), 30,
                 "servers = [\"127.0.0.1:" + std::to_string(a) +
                     "\", \"127.0.0.1:" + std::to_string(b) + "\"]\n" + upstream_keys);
  return config;
}

TEST(Upstreams, RoundRobin) {
  auto one = StartEcho();
  auto two = StartEcho();
  TestGateway gateway(TwoServers(one->port(), two->port()), 0);
  std::map<std::string, int> seen;
  std::string previous;
  for (int i = 0; i < 10; ++i) {
    Client client(gateway.port());
    const std::string port(client.Get("/")["X-Upstream-Port"]);
    EXPECT_NE(port, previous);
    previous = port;
    ++seen[port];
  }
  EXPECT_EQ(seen[std::to_string(one->port())], 5);
  EXPECT_EQ(seen[std::to_string(two->port())], 5);
}

TEST(Upstreams, RefusingServerIsSkippedForFailTimeout) {
  auto live = StartEcho();
  const std::uint16_t dead = DeadPort();
  TestGateway gateway(TwoServers(dead, live->port(), "fail_timeout = \"30s\"\n"), 0);
  // Every request succeeds: the refused connect moves on to the live server.
  for (int i = 0; i < 6; ++i) {
    Client client(gateway.port());
    Response res = client.Get("/");
    EXPECT_EQ(res.result_int(), 200);
    EXPECT_EQ(res["X-Upstream-Port"], std::to_string(live->port()));
  }
  // After fail_timeout the dead server is tried again (and still fails over).
  gateway.clock().Advance(31'000);
  Client client(gateway.port());
  EXPECT_EQ(client.Get("/").result_int(), 200);
}

// An upstream that misbehaves after some responses: for GET /extra it
// sends a second, unasked-for response in the same write (over TLS: as a
// record of its own, in the same TCP segment); for HEAD it sends a body
// 50 ms after the header. Otherwise it answers 200 with the request target
// as the body. Each connection is served on a thread of its own; with a
// certificate and key, over TLS.
class MisbehavingUpstream {
 public:
  explicit MisbehavingUpstream(const std::string& cert = "", const std::string& key = "")
      : acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}) {
    if (!cert.empty()) {
      tls_.emplace(asio::ssl::context::tls_server);
      tls_->use_certificate_chain_file(cert);
      tls_->use_private_key_file(key, asio::ssl::context::pem);
    }
    port_ = acceptor_.local_endpoint().port();
    accepting_ = std::thread([this] { Accept(); });
  }
  ~MisbehavingUpstream() {
    stop_ = true;
    {
      asio::io_context io;
      asio::ip::tcp::socket wake(io);
      boost::system::error_code ec;
      wake.connect({asio::ip::make_address("127.0.0.1"), port_}, ec);
    }
    accepting_.join();
    std::lock_guard lock(mutex_);
    for (auto& s : sockets_) {
      boost::system::error_code ec;
      s->shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    }
    for (auto& t : connections_) t.join();
  }
  std::uint16_t port() const { return port_; }

 private:
  void Accept() {
    for (;;) {
      auto socket = std::make_shared<asio::ip::tcp::socket>(io_);
      boost::system::error_code ec;
      acceptor_.accept(*socket, ec);
      if (ec || stop_) return;
      std::lock_guard lock(mutex_);
      sockets_.push_back(socket);
      connections_.emplace_back([this, socket] {
        if (!tls_) {
          Serve(*socket, *socket);
          return;
        }
        asio::ssl::stream<asio::ip::tcp::socket&> tls(*socket, *tls_);
        boost::system::error_code ec;
        tls.handshake(asio::ssl::stream_base::server, ec);
        if (!ec) Serve(tls, *socket);
      });
    }
  }
  // Both writes leave in one segment: with TLS, two records.
  static void Corked(asio::ip::tcp::socket& socket, bool on) {
    const int flag = on ? 1 : 0;
    setsockopt(socket.native_handle(), IPPROTO_TCP, TCP_CORK, &flag, sizeof(flag));
  }
  template <typename Stream>
  static void Serve(Stream& socket, asio::ip::tcp::socket& raw) {
    asio::streambuf in;
    for (;;) {
      boost::system::error_code ec;
      const std::size_t n = asio::read_until(socket, in, "\r\n\r\n", ec);
      if (ec) return;
      std::string head(asio::buffers_begin(in.data()), asio::buffers_begin(in.data()) + n);
      in.consume(n);
      const std::string method = head.substr(0, head.find(' '));
      const std::size_t target_at = head.find(' ') + 1;
      const std::string target = head.substr(target_at, head.find(' ', target_at) - target_at);
      const auto response = [](const std::string& body) {
        return "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
               body;
      };
      if (method == "HEAD") {
        asio::write(socket, asio::buffer("HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n"), ec);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        asio::write(socket, asio::buffer(response("POISON")), ec);
      } else if (target == "/extra") {
        Corked(raw, true);
        asio::write(socket, asio::buffer(response("/extra")), ec);
        asio::write(socket, asio::buffer(response("POISON")), ec);
        Corked(raw, false);
      } else {
        asio::write(socket, asio::buffer(response(target)), ec);
      }
      if (ec) return;
    }
  }

  asio::io_context io_;
  std::optional<asio::ssl::context> tls_;
  asio::ip::tcp::acceptor acceptor_;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread accepting_;
  std::mutex mutex_;
  std::vector<std::shared_ptr<asio::ip::tcp::socket>> sockets_;
  std::vector<std::thread> connections_;
};

// Bytes after a complete response never answer the next request: the
// connection that carried them is not reused.
TEST(Upstreams, BytesAfterAResponseDoNotAnswerTheNextRequest) {
  MisbehavingUpstream upstream;
  TestGateway gateway(WithEchoPort(BasicConfig(), upstream.port()), 0);
  for (int i = 0; i < 10; ++i) {
    Client attacker(gateway.port());
    EXPECT_EQ(attacker.Get("/extra").body(), "/extra");
    Client victim(gateway.port());
    const std::string target = "/victim-" + std::to_string(i);
    EXPECT_EQ(victim.Get(target).body(), target) << i;
  }
}

// Behind TLS the stray response is a record of its own: read off the socket
// with the first one, it waits in the TLS layer, not in the parser's buffer.
TEST(Upstreams, ARecordAfterATlsResponseDoesNotAnswerTheNextRequest) {
  TempDir dir;
  auto [cert, key] = MakeCertificate(dir, "upstream.test");
  MisbehavingUpstream upstream(cert, key);
  std::string config = WithEchoPort(BasicConfig(), upstream.port());
  config.replace(config.find("servers = [\"127.0.0.1:"), 0, "tls = { verify = false }\n");
  TestGateway gateway(config, 0);
  for (int i = 0; i < 10; ++i) {
    Client attacker(gateway.port());
    EXPECT_EQ(attacker.Get("/extra").body(), "/extra");
    Client victim(gateway.port());
    const std::string target = "/victim-" + std::to_string(i);
    EXPECT_EQ(victim.Get(target).body(), target) << i;
  }
}

TEST(Upstreams, ABodyAfterAHeadAnswerDoesNotAnswerTheNextRequest) {
  MisbehavingUpstream upstream;
  TestGateway gateway(WithEchoPort(BasicConfig(), upstream.port()), 0);
  for (int i = 0; i < 3; ++i) {
    Client attacker(gateway.port());
    attacker.Send("HEAD /h HTTP/1.1\r\nHost: test\r\n\r\n");
    EXPECT_EQ(attacker.Read(true).result_int(), 200);
    // The body arrives while the connection sits in the pool.
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    Client victim(gateway.port());
    const std::string target = "/victim-" + std::to_string(i);
    EXPECT_EQ(victim.Get(target).body(), target) << i;
  }
}

// Connections to 127.0.0.1:`port` in state ESTABLISHED: the connecting
// ends, the gateway's (/proc/net/tcp: remote address then state, hex).
int EstablishedTo(std::uint16_t port) {
  std::ifstream tcp("/proc/net/tcp");
  std::string line;
  std::getline(tcp, line);  // the column names
  char remote[32];
  std::snprintf(remote, sizeof remote, "0100007F:%04X", port);
  int count = 0;
  while (std::getline(tcp, line)) {
    std::istringstream fields(line);
    std::string slot, local, rem, state;
    fields >> slot >> local >> rem >> state;
    if (rem == remote && state == "01") ++count;
  }
  return count;
}

// A burst of requests in flight at once needs a connection each; once they
// are answered, no more than max_idle stay open (the surplus is closed at
// the end of the event-loop turn that released it), and the rest serve.
TEST(Upstreams, IdleConnectionsBeyondMaxIdleAreClosed) {
  auto echo = StartEcho();
  std::string config = WithEchoPort(BasicConfig(), echo->port());
  config.replace(config.find("servers = [\"127.0.0.1:"), 0, "max_idle = 2\n");
  TestGateway gateway(config, 0);
  std::vector<std::thread> burst;
  std::atomic<int> ok{0};
  for (int i = 0; i < 6; ++i) {
    burst.emplace_back([&] {
      Client client(gateway.port());
      if (client.Get("/_test/sleep/300").result_int() == 200) ++ok;
    });
  }
  for (auto& t : burst) t.join();
  EXPECT_EQ(ok, 6);
  // The gateway closes the surplus as the answers come back.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (EstablishedTo(echo->port()) > 2 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::yield();
  }
  EXPECT_LE(EstablishedTo(echo->port()), 2);
  Client client(gateway.port());
  EXPECT_EQ(client.Get("/").result_int(), 200);
}

TEST(Upstreams, AllServersDownIs502) {
  TestGateway gateway(TwoServers(DeadPort(), DeadPort()), 0);
  Client client(gateway.port());
  EXPECT_EQ(client.Get("/").result_int(), 502);
}

}  // namespace
}  // namespace tollgate::testing
