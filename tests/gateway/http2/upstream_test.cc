// Http2UpstreamPool against real HTTP/2 servers on loopback: tollgate's own
// server side (Http2Connection, over cleartext and over TLS with ALPN),
// python3-h2 servers that misbehave on purpose (upstream_peer.py: GOAWAY,
// REFUSED_STREAM, SETTINGS_MAX_CONCURRENT_STREAMS = 2, no SETTINGS at all),
// and nghttpd (Debian's nghttp2-server) over TLS. The client side runs on an
// io_context of the test thread, as on a worker.
#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <boost/json.hpp>
#include <charconv>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gateway/http2/connection.h"
#include "gateway/http2/upstream_pool.h"
#include "gateway/io/tls.h"
#include "tests/gateway/test_support.h"
#include "tests/support/net.h"

namespace tollgate::gateway {
namespace {

using namespace std::chrono_literals;
using testing::UnusedPort;

const std::string kPython = "/usr/bin/python3";
const std::string kPeer = std::string(TOLLGATE_HTTP2_SCRIPTS) + "/upstream_peer.py";
constexpr auto kTimeout = std::chrono::seconds(10);
constexpr std::size_t kMiB = 1 << 20;

std::string Pattern(std::size_t n) {
  std::string out(n, '\0');
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<char>((i * 7 + 3) & 0xff);
  return out;
}

std::size_t QueryNumber(std::string_view target, std::string_view key) {
  const std::size_t at = target.find(key);
  std::size_t n = 0;
  if (at != std::string_view::npos) {
    const std::string_view rest = target.substr(at + key.size());
    std::from_chars(rest.data(), rest.data() + rest.size(), n);
  }
  return n;
}

int SelectAlpn(SSL*, const unsigned char** out, unsigned char* out_len, const unsigned char* in,
               unsigned int in_len, void* arg) {
  const auto* offered = static_cast<const std::string*>(arg);
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, out_len,
                            reinterpret_cast<const unsigned char*>(offered->data()),
                            static_cast<unsigned int>(offered->size()), in,
                            in_len) != OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

// tollgate's own HTTP/2 server side as the upstream, on a thread of its
// own. Paths: /hello?delay=MS (200, "hello <target>" after MS ms),
// /big?n=N (N bytes of Pattern, 16 KiB a write), /echo (the request body
// back as it arrives; with ?trailers the request's trailers come back as
// response trailers, and grpc-status: 0), /never (no answer until the
// client resets the stream), /stall (a header and 5 bytes, then nothing).
class OwnServer {
 public:
  enum class Tls { kNo, kYes };

  explicit OwnServer(Http2Options options = {}, Tls tls = Tls::kNo,
                     std::string alpn = std::string("\x02h2", 3))
      : options_(options), alpn_(std::move(alpn)), acceptor_(io_.get_executor()) {
    if (tls == Tls::kYes) {
      std::tie(cert_, key_) = testing::MakeCertificate(dir_, "localhost");
      tls_.emplace(ssl::context::tls_server);
      tls_->use_certificate_chain_file(cert_);
      tls_->use_private_key_file(key_, ssl::context::pem);
      SSL_CTX_set_alpn_select_cb(tls_->native_handle(), &SelectAlpn, &alpn_);
    }
    const tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), 0);
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    asio::co_spawn(io_, Accept(), asio::detached);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~OwnServer() {
    asio::post(io_, [this] {
      ErrorCode ignored;
      acceptor_.close(ignored);
      for (Http2Connection* c : live_) c->Close();
    });
    for (int i = 0; i < 3000 && serving_ > 0; ++i) std::this_thread::sleep_for(10ms);
    io_.stop();
    thread_.join();
  }

  std::uint16_t port() const { return port_; }
  const std::string& cert() const { return cert_; }
  int connections() const { return connections_; }
  int streams() const { return streams_; }
  int peer_resets() const { return peer_resets_; }
  // GOAWAY on every live connection (a drain): streams in flight finish.
  void Shutdown() {
    asio::post(io_, [this] {
      for (Http2Connection* c : live_) c->Shutdown();
    });
  }

 private:
  Task<void> Accept() {
    for (;;) {
      auto [ec, socket] = co_await acceptor_.async_accept(kUseTuple);
      if (ec) co_return;
      ++connections_;
      ++serving_;
      asio::co_spawn(io_, Serve(std::move(socket)), asio::detached);
    }
  }

  Task<void> Serve(TcpSocket socket) {
    std::optional<AnyStream> stream;
    std::string first;
    if (tls_) {
      stream.emplace(std::in_place_type<TlsStream>, std::move(socket), *tls_);
      Lowest(*stream).expires_after(5s);
      auto [ec] = co_await std::get<TlsStream>(*stream).async_handshake(ssl::stream_base::server,
                                                                          kUseTuple);
      if (ec) {
        --serving_;
        co_return;
      }
    } else {
      stream.emplace(std::in_place_type<TcpStream>, std::move(socket));
    }
    Http2Connection connection(*stream, options_,
                               [this](Http2Stream& s) { return Handle(s); });
    live_.insert(&connection);
    co_await connection.Run();
    live_.erase(&connection);
    peer_resets_ += static_cast<int>(connection.stats().peer_resets);
    --serving_;
  }

  static Task<void> Send(Http2Stream& s, std::string body, const Fields* trailers = nullptr) {
    http::response_header<Fields> head;
    head.result(http::status::ok);
    if (trailers == nullptr) head.set(http::field::content_length, std::to_string(body.size()));
    if (s.SubmitResponse(head, Http2Body::kFollows)) co_return;
    const BodyEnd end = trailers != nullptr ? BodyEnd::kMore : BodyEnd::kLast;
    const ErrorCode ec = co_await s.WriteBody(asio::buffer(body), end, kTimeout);
    if (!ec && trailers != nullptr) s.SubmitTrailers(*trailers);
  }

  // Returns when the client resets `s` (or after 30 s).
  static Task<void> UntilCancelled(Http2Stream& s) {
    Timer timer(co_await asio::this_coro::executor, 30s);
    s.OnCancel([&timer] { timer.cancel(); });
    if (!s.cancelled()) {
      co_await timer.async_wait(kUseTuple);
    }
  }

  Task<void> Handle(Http2Stream& s) {
    ++streams_;
    const std::string target(s.request().target());
    const std::string path = target.substr(0, target.find('?'));
    if (path == "/hello") {
      if (const std::size_t delay = QueryNumber(target, "delay=")) {
        Timer timer(co_await asio::this_coro::executor, std::chrono::milliseconds(delay));
        co_await timer.async_wait(kUseTuple);
      }
      co_await Send(s, "hello " + target);
    } else if (path == "/big") {
      const std::string data = Pattern(QueryNumber(target, "n="));
      http::response_header<Fields> head;
      head.result(http::status::ok);
      if (s.SubmitResponse(head, Http2Body::kFollows)) co_return;
      for (std::size_t sent = 0; sent < data.size();) {
        const std::size_t chunk = std::min<std::size_t>(16 * 1024, data.size() - sent);
        const BodyEnd end = sent + chunk == data.size() ? BodyEnd::kLast : BodyEnd::kMore;
        const ErrorCode ec =
            co_await s.WriteBody(asio::buffer(data.data() + sent, chunk), end, kTimeout);
        if (ec) co_return;
        sent += chunk;
      }
    } else if (path == "/echo") {
      http::response_header<Fields> head;
      head.result(http::status::ok);
      if (s.SubmitResponse(head, Http2Body::kFollows)) co_return;
      const bool trailers = target.find("trailers") != std::string::npos;
      char buffer[16 * 1024];
      for (;;) {
        const Http2Read r = co_await s.ReadBody(asio::buffer(buffer), kTimeout);
        if (r.ec) co_return;
        const BodyEnd end = r.end && !trailers ? BodyEnd::kLast : BodyEnd::kMore;
        const ErrorCode ec = co_await s.WriteBody(asio::buffer(buffer, r.bytes), end, kTimeout);
        if (ec) co_return;
        if (r.end) break;
      }
      if (trailers) {
        Fields out = s.trailers();
        out.set("grpc-status", "0");
        s.SubmitTrailers(out);
      }
    } else if (path == "/never") {
      co_await UntilCancelled(s);
    } else if (path == "/stall") {
      http::response_header<Fields> head;
      head.result(http::status::ok);
      if (s.SubmitResponse(head, Http2Body::kFollows)) co_return;
      const ErrorCode ec =
          co_await s.WriteBody(asio::buffer(std::string_view("start")), BodyEnd::kMore, kTimeout);
      if (!ec) co_await UntilCancelled(s);
    } else {
      http::response_header<Fields> head;
      head.result(http::status::not_found);
      s.SubmitResponse(head, Http2Body::kNone);
    }
  }

  testing::TempDir dir_;
  std::string cert_, key_;
  Http2Options options_;
  std::string alpn_;  // offered, in ALPN's wire format
  std::optional<ssl::context> tls_;
  asio::io_context io_;
  Acceptor acceptor_;
  std::uint16_t port_ = 0;
  std::set<Http2Connection*> live_;
  std::atomic<int> connections_{0};
  std::atomic<int> streams_{0};
  std::atomic<int> serving_{0};
  std::atomic<int> peer_resets_{0};
  std::thread thread_;
};

// A python3-h2 server of upstream_peer.py, and the counters it writes.
class PeerServer {
 public:
  explicit PeerServer(const std::string& scenario)
      : stats_(dir_.path() + "/stats.json"), process_({kPython, kPeer, scenario, stats_}) {
    const std::string line = process_.StderrLine();
    EXPECT_EQ(line.rfind("port=", 0), 0u) << line;
    port_ = static_cast<std::uint16_t>(std::atoi(line.c_str() + 5));
  }
  std::uint16_t port() const { return port_; }
  std::int64_t Stat(const std::string& key) const {
    std::ifstream in(stats_);
    std::stringstream text;
    text << in.rdbuf();
    return boost::json::parse(text.str()).as_object().at(key).as_int64();
  }

 private:
  testing::TempDir dir_;
  std::string stats_;
  testing::Process process_;
  std::uint16_t port_ = 0;
};

// nghttpd (nghttp2-server) over TLS, serving `dir`, uploads echoed back.
class Nghttpd {
 public:
  Nghttpd(const std::string& dir, const std::string& cert, const std::string& key,
          const std::vector<std::string>& extra)
      : port_(UnusedPort()), process_(Argv(dir, cert, key, extra)) {
    // Ready once it accepts a connection.
    for (int i = 0; i < 500; ++i) {
      asio::io_context io;
      tcp::socket socket(io);
      ErrorCode ec;
      socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port_), ec);
      if (!ec) return;
      std::this_thread::sleep_for(10ms);
    }
    ADD_FAILURE() << "nghttpd did not start";
  }
  std::uint16_t port() const { return port_; }

 private:
  std::vector<std::string> Argv(const std::string& dir, const std::string& cert,
                                const std::string& key, const std::vector<std::string>& extra) {
    std::vector<std::string> argv{"/usr/sbin/nghttpd", "-a", "127.0.0.1", "-d", dir, "--echo-upload"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.insert(argv.end(), {std::to_string(port_), key, cert});
    return argv;
  }

  std::uint16_t port_;
  testing::Process process_;
};

struct Fetched {
  ConnectFailure failure = ConnectFailure::kNone;
  ErrorCode ec;
  unsigned status = 0;
  std::string body;
  std::string server;
  std::map<std::string, std::string> fields;
  std::map<std::string, std::string> trailers;
};

struct Request {
  explicit Request(http::verb m = http::verb::get, std::string t = "/hello", std::string b = "")
      : method(m), target(std::move(t)), body(std::move(b)) {}
  http::verb method;
  std::string target;
  std::string body;
  Fields trailers;  // sent after the body (EndBody) when not empty
};

std::map<std::string, std::string> ToMap(const Fields& fields) {
  std::map<std::string, std::string> out;
  for (const auto& f : fields) out[std::string(f.name_string())] = std::string(f.value());
  return out;
}

// The client side: a pool for `ports` on an io_context that Run() runs.
class Client {
 public:
  Client(std::vector<std::uint16_t> ports, rules::UpstreamProtocol protocol,
         const Http2UpstreamOptions& options = {}, const std::string& ca_file = "") {
    config_.name = "up";
    config_.protocol = protocol;
    config_.fail_timeout_ms = 10'000;
    std::vector<tcp::endpoint> endpoints;
    for (const std::uint16_t port : ports) {
      config_.servers.push_back({"127.0.0.1", port});
      endpoints.emplace_back(asio::ip::make_address("127.0.0.1"), port);
    }
    if (protocol == rules::UpstreamProtocol::kH2) {
      config_.tls.emplace();
      config_.tls->ca_file = ca_file;
      config_.tls->sni = "localhost";
      std::string error;
      tls_ = CreateClientTls(*config_.tls, error);
      EXPECT_TRUE(tls_) << error;
    }
    pool_.emplace(config_, endpoints, tls_.get(), clock_, options);
  }

  Http2UpstreamPool& pool() { return *pool_; }
  Executor executor() { return io_.get_executor(); }

  // Runs `scenario` on the pool's thread (this one) until it ends.
  void Run(std::function<Task<void>()> scenario) {
    bool done = false;
    asio::co_spawn(io_, std::move(scenario), [&](std::exception_ptr e) {
      done = true;
      if (e) std::rethrow_exception(e);
    });
    while (!done && io_.run_one() > 0) {
    }
    EXPECT_TRUE(done);
  }

  // One exchange; with `write_alongside`, the body is written by a
  // coroutine of its own while the response is read (a proxy relays both
  // ways at once).
  Task<Fetched> Fetch(Request request, std::chrono::steady_clock::duration read_timeout = kTimeout,
                      std::chrono::milliseconds read_pause = 0ms) {
    Fetched out;
    http::request_header<Fields> head;
    head.method(request.method);
    head.target(request.target);
    head.set(http::field::host, "upstream.test");
    head.set(http::field::connection, "keep-alive");  // left out: HTTP/2 has none
    const bool has_body = !request.body.empty() || request.trailers.begin() != request.trailers.end();
    // (GCC 12 destroys temporaries twice when a ?: sits in a co_await
    // expression.)
    const Http2Body body = has_body ? Http2Body::kFollows : Http2Body::kNone;
    Http2OpenResult open = co_await pool_->Open(head, body, 2s);
    out.failure = open.failure;
    out.server = std::string(open.server);
    if (open.failure != ConnectFailure::kNone) co_return out;
    Http2UpstreamStream& stream = open.stream;
    ErrorCode write_ec;
    bool writing = has_body;
    if (has_body) Spawn([&]() -> Task<void> {
      write_ec = co_await WriteAll(stream, request);
      writing = false;
    });
    out.ec = co_await stream.ReadResponseHead(read_timeout);
    if (!out.ec) {
      out.status = stream.response().result_int();
      out.fields = ToMap(stream.response());
      if (read_pause > 0ms) {
        Timer pause(io_.get_executor(), read_pause);
        co_await pause.async_wait(kUseTuple);
      }
      char buffer[8 * 1024];
      while (stream.response_has_body()) {
        const Http2Read r = co_await stream.ReadBody(asio::buffer(buffer), read_timeout);
        out.ec = r.ec;
        if (r.ec) break;
        out.body.append(buffer, r.bytes);
        if (r.end) break;
      }
      out.trailers = ToMap(stream.trailers());
    }
    if (out.ec) stream.Reset();
    while (writing) {
      co_await Sleep(1ms);
    }
    if (!out.ec) out.ec = write_ec;
    co_return out;
  }

  // Runs every request at once; returns when all have ended.
  Task<std::vector<Fetched>> FetchAll(std::vector<Request> requests) {
    std::vector<Fetched> results(requests.size());
    std::size_t done = 0;
    for (std::size_t i = 0; i < requests.size(); ++i) {
      Spawn([&, i]() -> Task<void> {
        results[i] = co_await Fetch(requests[i]);
        ++done;
      });
    }
    while (done < requests.size()) {
      co_await Sleep(2ms);
    }
    co_return results;
  }

  // Starts `fn` as a coroutine of its own from a handler of its own (not
  // inside the caller's).
  void Spawn(std::function<Task<void>()> fn) {
    asio::post(io_, [this, fn = std::move(fn)]() mutable {
      asio::co_spawn(io_, std::move(fn), asio::detached);
    });
  }

  Task<void> Sleep(std::chrono::milliseconds d) {
    Timer timer(io_.get_executor(), d);
    co_await timer.async_wait(kUseTuple);
  }

 private:
  static Task<ErrorCode> WriteAll(Http2UpstreamStream& stream, const Request& request) {
    const bool trailers = request.trailers.begin() != request.trailers.end();
    for (std::size_t sent = 0; sent < request.body.size();) {
      const std::size_t chunk = std::min<std::size_t>(16 * 1024, request.body.size() - sent);
      const BodyEnd end =
          sent + chunk == request.body.size() && !trailers ? BodyEnd::kLast : BodyEnd::kMore;
      const ErrorCode ec =
          co_await stream.WriteBody(asio::buffer(request.body.data() + sent, chunk), end, kTimeout);
      if (ec) co_return ec;
      sent += chunk;
    }
    if (trailers) co_return stream.EndBody(request.trailers);
    co_return ErrorCode{};
  }

  rules::UpstreamConfig config_;
  std::unique_ptr<ssl::context> tls_;
  store::SteadyClock clock_;
  // Declared after what it uses, before nothing it is used by: destroyed
  // first, it closes its connections while io_ still exists.
  asio::io_context io_;
  std::optional<Http2UpstreamPool> pool_;
};

std::vector<Request> Hellos(int n, const std::string& query = "") {
  std::vector<Request> out;
  for (int i = 0; i < n; ++i) out.emplace_back(http::verb::get, "/hello?i=" + std::to_string(i) + query);
  return out;
}

void ExpectHellos(const std::vector<Fetched>& results, const std::string& query = "") {
  for (std::size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(results[i].failure, ConnectFailure::kNone) << i;
    EXPECT_FALSE(results[i].ec) << i << ": " << results[i].ec.message();
    EXPECT_EQ(results[i].status, 200u) << i;
    EXPECT_EQ(results[i].body, "hello /hello?i=" + std::to_string(i) + query) << i;
  }
}

// ---------------------------------------------------------------------------
// tollgate's own server as the upstream (h2c, and h2 over TLS).

TEST(Http2Upstream, ManyConcurrentStreamsShareOneConnection) {
  OwnServer server;
  Client client({server.port()}, rules::UpstreamProtocol::kH2c);
  client.Run([&]() -> Task<void> {
    const std::vector<Fetched> results = co_await client.FetchAll(Hellos(50, "&delay=50"));
    ExpectHellos(results, "&delay=50");
    EXPECT_EQ(results[0].server, "127.0.0.1:" + std::to_string(server.port()));
    EXPECT_EQ(results[0].fields.at("content-length"), std::to_string(results[0].body.size()));
    // And the connection stays for the next requests.
    ExpectHellos(co_await client.FetchAll(Hellos(5)));
  });
  EXPECT_EQ(server.connections(), 1);
  EXPECT_EQ(server.streams(), 55);
  EXPECT_EQ(client.pool().stats().connections, 1u);
  EXPECT_EQ(client.pool().connections(), 1u);
}

TEST(Http2Upstream, MegabyteBothWaysUnderFlowControl) {
  // Small windows on both sides: each megabyte takes dozens of
  // WINDOW_UPDATEs, and the echo can only go on as the client reads.
  Http2Options server_options;
  server_options.stream_window_bytes = 16 * 1024;
  OwnServer server(server_options);
  Http2UpstreamOptions options;
  options.stream_window_bytes = 16 * 1024;
  Client client({server.port()}, rules::UpstreamProtocol::kH2c, options);
  const std::string body = Pattern(kMiB);
  client.Run([&]() -> Task<void> {
    const Fetched echo = co_await client.Fetch(Request(http::verb::post, "/echo", body));
    EXPECT_FALSE(echo.ec) << echo.ec.message();
    EXPECT_EQ(echo.status, 200u);
    EXPECT_EQ(echo.body.size(), body.size());
    EXPECT_TRUE(echo.body == body);
    const Fetched big = co_await client.Fetch(Request(http::verb::get, "/big?n=1048576"));
    EXPECT_FALSE(big.ec) << big.ec.message();
    EXPECT_TRUE(big.body == body);
  });
}

// A caller that does not read its response holds up its own stream only:
// another stream on the same connection completes meanwhile.
TEST(Http2Upstream, SlowReaderSlowsOnlyItsStream) {
  OwnServer server;
  Http2UpstreamOptions options;
  options.stream_window_bytes = 64 * 1024;
  Client client({server.port()}, rules::UpstreamProtocol::kH2c, options);
  client.Run([&]() -> Task<void> {
    bool slow_done = false;
    Fetched slow;
    asio::co_spawn(
        client.executor(),
        [&]() -> Task<void> {
          slow = co_await client.Fetch(Request(http::verb::get, "/big?n=1048576"), kTimeout, 1500ms);
          slow_done = true;
        },
        asio::detached);
    co_await client.Sleep(200ms);
    const Fetched fast = co_await client.Fetch(Request(http::verb::get, "/big?n=1048576"));
    EXPECT_FALSE(fast.ec) << fast.ec.message();
    EXPECT_EQ(fast.body.size(), kMiB);
    EXPECT_FALSE(slow_done);  // still paused while the other one completed
    while (!slow_done) {
      co_await client.Sleep(5ms);
    }
    EXPECT_FALSE(slow.ec) << slow.ec.message();
    EXPECT_TRUE(slow.body == Pattern(kMiB));
  });
  EXPECT_EQ(server.connections(), 1);
}

TEST(Http2Upstream, TrailersBothWays) {
  OwnServer server;
  Client client({server.port()}, rules::UpstreamProtocol::kH2c);
  client.Run([&]() -> Task<void> {
    Request request(http::verb::post, "/echo?trailers", "payload");
    request.trailers.set("x-checksum", "42");
    const Fetched f = co_await client.Fetch(std::move(request));
    EXPECT_FALSE(f.ec) << f.ec.message();
    EXPECT_EQ(f.body, "payload");
    EXPECT_EQ(f.trailers.at("grpc-status"), "0");
    EXPECT_EQ(f.trailers.at("x-checksum"), "42");
  });
}

TEST(Http2Upstream, ResponseHeadAndBodyReadsTimeOut) {
  OwnServer server;
  Client client({server.port()}, rules::UpstreamProtocol::kH2c);
  client.Run([&]() -> Task<void> {
    const Fetched never = co_await client.Fetch(Request(http::verb::get, "/never"), 300ms);
    EXPECT_EQ(never.ec, beast::error::timeout);
    const Fetched stall = co_await client.Fetch(Request(http::verb::get, "/stall"), 300ms);
    EXPECT_EQ(stall.status, 200u);
    EXPECT_EQ(stall.body, "start");
    EXPECT_EQ(stall.ec, beast::error::timeout);
    // Both streams were reset (CANCEL), the connection serves on.
    ExpectHellos(co_await client.FetchAll(Hellos(1)));
  });
  EXPECT_EQ(server.connections(), 1);
}

TEST(Http2Upstream, ServerDownIsAConnectFailureAndTheNextServerServes) {
  OwnServer server;
  const std::uint16_t dead = UnusedPort();
  Client client({dead, server.port()}, rules::UpstreamProtocol::kH2c);
  client.Run([&]() -> Task<void> {
    const Fetched f = co_await client.Fetch(Request());
    EXPECT_EQ(f.failure, ConnectFailure::kNone);
    EXPECT_EQ(f.status, 200u);
    EXPECT_EQ(f.server, "127.0.0.1:" + std::to_string(server.port()));
  });
  Client alone({dead}, rules::UpstreamProtocol::kH2c);
  alone.Run([&]() -> Task<void> {
    const Fetched f = co_await alone.Fetch(Request());
    EXPECT_EQ(f.failure, ConnectFailure::kRefused);
    EXPECT_EQ(f.server, "127.0.0.1:" + std::to_string(dead));
  });
}

TEST(Http2Upstream, H2OverTlsNegotiatesAlpn) {
  OwnServer server({}, OwnServer::Tls::kYes);
  Client client({server.port()}, rules::UpstreamProtocol::kH2, {}, server.cert());
  client.Run([&]() -> Task<void> { ExpectHellos(co_await client.FetchAll(Hellos(20))); });
  EXPECT_EQ(server.connections(), 1);
  // A TLS server that does not offer h2 is no HTTP/2 upstream.
  OwnServer http1_only({}, OwnServer::Tls::kYes, std::string("\x08http/1.1", 9));
  Client refused({http1_only.port()}, rules::UpstreamProtocol::kH2, {}, http1_only.cert());
  refused.Run([&]() -> Task<void> {
    const Fetched f = co_await refused.Fetch(Request());
    EXPECT_EQ(f.failure, ConnectFailure::kRefused);
  });
}

// The server drains (GOAWAY as Http2Connection::Shutdown sends it): the
// streams it has finish; later ones go to a new connection.
TEST(Http2Upstream, GracefulGoawayFinishesStreamsAndMovesOn) {
  OwnServer server;
  Client client({server.port()}, rules::UpstreamProtocol::kH2c);
  client.Run([&]() -> Task<void> {
    std::vector<Fetched> first;
    bool first_done = false;
    asio::co_spawn(
        client.executor(),
        [&]() -> Task<void> {
          first = co_await client.FetchAll(Hellos(10, "&delay=300"));
          first_done = true;
        },
        asio::detached);
    co_await client.Sleep(100ms);
    server.Shutdown();
    co_await client.Sleep(100ms);
    ExpectHellos(co_await client.FetchAll(Hellos(10)));
    while (!first_done) {
      co_await client.Sleep(5ms);
    }
    ExpectHellos(first, "&delay=300");
  });
  EXPECT_EQ(server.connections(), 2);
  EXPECT_GE(client.pool().stats().goaways, 1u);
}

// ---------------------------------------------------------------------------
// python3-h2 servers that misbehave on purpose.

TEST(Http2Upstream, GoawayMidTrafficLosesNothing) {
  PeerServer peer("goaway");
  Client client({peer.port()}, rules::UpstreamProtocol::kH2c);
  client.Run([&]() -> Task<void> { ExpectHellos(co_await client.FetchAll(Hellos(20))); });
  // The first connection answered the streams up to its GOAWAY's
  // last-stream-id; those above it were sent again on a second one.
  EXPECT_EQ(peer.Stat("connections"), 2);
  EXPECT_GE(client.pool().stats().retries, 2u);
  EXPECT_EQ(client.pool().stats().goaways, 1u);
}

TEST(Http2Upstream, RefusedStreamIsRetriedOnce) {
  {
    PeerServer peer("refuse");
    Client client({peer.port()}, rules::UpstreamProtocol::kH2c);
    client.Run([&]() -> Task<void> {
      ExpectHellos(co_await client.FetchAll(Hellos(1)));
      // A body is sent again too.
      const Fetched post = co_await client.Fetch(Request(http::verb::post, "/hello?i=0", "data"));
      EXPECT_EQ(post.status, 200u);
    });
    EXPECT_EQ(peer.Stat("refused"), 1);
    EXPECT_EQ(client.pool().stats().retries, 1u);
  }
  PeerServer peer("refuse_all");
  Client client({peer.port()}, rules::UpstreamProtocol::kH2c);
  client.Run([&]() -> Task<void> {
    const Fetched f = co_await client.Fetch(Request());
    EXPECT_EQ(f.ec, MakeErrorCode(Http2Errc::kStreamReset));
    EXPECT_EQ(f.status, 0u);
  });
  EXPECT_EQ(peer.Stat("streams"), 2);  // the request and its one retry
}

// SETTINGS_MAX_CONCURRENT_STREAMS = 2 and 10 requests at once: never more
// than 2 streams on a connection; more connections up to the per-server
// cap, then the rest wait for a stream to end.
TEST(Http2Upstream, MaxConcurrentStreamsOpensConnectionsThenQueues) {
  {
    PeerServer peer("max2");
    Http2UpstreamOptions options;
    options.max_connections_per_server = 3;
    Client client({peer.port()}, rules::UpstreamProtocol::kH2c, options);
    client.Run([&]() -> Task<void> { ExpectHellos(co_await client.FetchAll(Hellos(10))); });
    EXPECT_EQ(peer.Stat("max_concurrent"), 2);
    EXPECT_EQ(peer.Stat("refused"), 0);
    EXPECT_EQ(peer.Stat("connections"), 3);
    EXPECT_GT(client.pool().stats().waits, 0u);
  }
  PeerServer peer("max2");
  Http2UpstreamOptions options;
  options.max_connections_per_server = 1;
  Client client({peer.port()}, rules::UpstreamProtocol::kH2c, options);
  client.Run([&]() -> Task<void> { ExpectHellos(co_await client.FetchAll(Hellos(10))); });
  EXPECT_EQ(peer.Stat("connections"), 1);
  EXPECT_EQ(peer.Stat("max_concurrent"), 2);
  EXPECT_EQ(client.pool().stats().waits, 9u);  // all but the first
}

TEST(Http2Upstream, ServerThatNeverSendsSettingsTimesOut) {
  PeerServer peer("silent");
  Client client({peer.port()}, rules::UpstreamProtocol::kH2c);
  client.Run([&]() -> Task<void> {
    const auto start = std::chrono::steady_clock::now();
    const Fetched f = co_await client.Fetch(Request());
    EXPECT_EQ(f.failure, ConnectFailure::kTimeout);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  });
}

// ---------------------------------------------------------------------------
// nghttpd over TLS.

TEST(Http2Upstream, NghttpdOverTls) {
  testing::TempDir dir;
  auto [cert, key] = testing::MakeCertificate(dir, "localhost");
  const std::string file = Pattern(kMiB);
  dir.Write("file", file);
  // 16 KiB windows (2^14 - 1), at most 2 streams at once, trailers.
  Nghttpd nghttpd(dir.path(), cert, key, {"-w", "14", "-m", "2", "--trailer", "x-served-by: nghttpd"});
  Http2UpstreamOptions options;
  options.max_connections_per_server = 2;
  Client client({nghttpd.port()}, rules::UpstreamProtocol::kH2, options, cert);
  client.Run([&]() -> Task<void> {
    std::vector<Request> requests;
    for (int i = 0; i < 6; ++i) requests.emplace_back(http::verb::get, "/file");
    requests.emplace_back(http::verb::post, "/file", file);
    for (const Fetched& f : co_await client.FetchAll(requests)) {
      EXPECT_FALSE(f.ec) << f.ec.message();
      EXPECT_EQ(f.status, 200u);
      EXPECT_EQ(f.body.size(), kMiB);
      EXPECT_TRUE(f.body == file);
      EXPECT_EQ(f.trailers.count("x-served-by") ? f.trailers.at("x-served-by") : "", "nghttpd");
    }
  });
  EXPECT_LE(client.pool().stats().connections, 2u);
}

}  // namespace
}  // namespace tollgate::gateway
