// Http2Connection over real loopback sockets, with real peers: python3-h2
// clients (h2_peer.py, run with /usr/bin/python3: well-behaved requests and
// raw-frame floods), nghttp, curl and h2load (Debian's nghttp2-client and
// curl). The server here is a test harness, not the gateway: an acceptor
// that reads the first bytes as the HTTP/1.1 listener will (prior
// knowledge), or does a TLS handshake with ALPN "h2", and runs an
// Http2Connection whose handler answers by path.
#include "gateway/http2/connection.h"

#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include <atomic>
#include <charconv>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/gateway/test_support.h"

namespace tollgate::gateway {
namespace {

using namespace std::chrono_literals;
using testing::RunCommand;
using testing::Shell;

const std::string kPython = "/usr/bin/python3";
const std::string kPeer = std::string(TOLLGATE_HTTP2_SCRIPTS) + "/h2_peer.py";
constexpr auto kBodyTimeout = std::chrono::seconds(10);

int SelectH2(SSL*, const unsigned char** out, unsigned char* out_len, const unsigned char* in,
             unsigned int in_len, void*) {
  static const unsigned char kH2[] = {2, 'h', '2'};
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, out_len, kH2, sizeof kH2, in, in_len) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

struct Ended {
  Http2CloseReason reason;
  Http2Stats stats;
};

class H2TestServer {
 public:
  enum class Tls { kNo, kYes };

  explicit H2TestServer(Http2Options options = {}, Tls tls = Tls::kNo)
      : options_(options), acceptor_(io_.get_executor()) {
    if (tls == Tls::kYes) {
      auto [cert, key] = testing::MakeCertificate(dir_, "localhost");
      tls_.emplace(ssl::context::tls_server);
      tls_->use_certificate_chain_file(cert);
      tls_->use_private_key_file(key, ssl::context::pem);
      SSL_CTX_set_alpn_select_cb(tls_->native_handle(), &SelectH2, nullptr);
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

  ~H2TestServer() {
    asio::post(io_, [this] {
      ErrorCode ignored;
      acceptor_.close(ignored);
      OpenGateNow();
      for (Http2Connection* c : live_) c->Close();
    });
    {
      std::unique_lock lock(mutex_);
      cv_.wait_for(lock, 30s, [this] { return serving_ == 0; });
    }
    io_.stop();
    thread_.join();
  }

  std::uint16_t port() const { return port_; }
  std::string http() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string https() const { return "https://localhost:" + std::to_string(port_); }

  void OpenGate() {
    asio::post(io_, [this] { OpenGateNow(); });
  }

  // Waits (a real wait on the server's events, at most 30 s) until `done`.
  bool WaitFor(const std::function<bool()>& done) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, 30s, done);
  }
  bool WaitForEnded(std::size_t n) {
    return WaitFor([&] { return ended_.size() >= n; });
  }
  std::vector<Ended> ended() {
    std::lock_guard lock(mutex_);
    return ended_;
  }
  int started() const { return started_; }
  // Whether calls after the response's end failed as they should.
  bool MisuseAfterEnd() {
    WaitFor([this] { return misuse_checked_; });
    std::lock_guard lock(mutex_);
    return misuse_after_end_;
  }
  int cancelled() const { return cancelled_; }

 private:
  Task<void> Accept() {
    for (;;) {
      auto [ec, socket] = co_await acceptor_.async_accept(kUseTuple);
      if (ec) co_return;
      {
        std::lock_guard lock(mutex_);
        ++serving_;
      }
      asio::co_spawn(io_, Serve(std::move(socket)), asio::detached);
    }
  }

  Task<void> Serve(TcpSocket socket) {
    std::optional<AnyStream> stream;
    std::string first;
    if (tls_) {
      stream.emplace(std::in_place_type<TlsStream>, std::move(socket), *tls_);
      auto& tls = std::get<TlsStream>(*stream);
      Lowest(*stream).expires_after(5s);
      auto [ec] = co_await tls.async_handshake(ssl::stream_base::server, kUseTuple);
      const unsigned char* alpn = nullptr;
      unsigned int alpn_len = 0;
      SSL_get0_alpn_selected(tls.native_handle(), &alpn, &alpn_len);
      if (ec || std::string_view(reinterpret_cast<const char*>(alpn), alpn_len) != "h2") {
        Finish(Http2CloseReason::kIoError, {});
        co_return;
      }
    } else {
      // As the HTTP/1.1 listener will: read until the preface decides, and
      // hand everything read so far to the connection.
      stream.emplace(std::in_place_type<TcpStream>, std::move(socket));
      char buffer[4096];
      Lowest(*stream).expires_after(5s);
      while (MatchHttp2Preface(first) == PrefaceMatch::kPrefix) {
        auto [ec, n] = co_await Lowest(*stream).async_read_some(asio::buffer(buffer), kUseTuple);
        if (ec) {
          Finish(Http2CloseReason::kIoError, {});
          co_return;
        }
        first.append(buffer, n);
      }
      if (MatchHttp2Preface(first) == PrefaceMatch::kNo) {
        Finish(Http2CloseReason::kIoError, {});
        co_return;
      }
    }
    Http2Connection* self = nullptr;
    Http2Connection connection(*stream, options_,
                               [this, &self](Http2Stream& s) { return Handle(*self, s); });
    self = &connection;
    live_.insert(self);
    co_await connection.Run(asio::buffer(first));
    live_.erase(self);
    Finish(connection.close_reason(), connection.stats());
  }

  void Finish(Http2CloseReason reason, const Http2Stats& stats) {
    std::lock_guard lock(mutex_);
    --serving_;
    ended_.push_back({reason, stats});
    cv_.notify_all();
  }

  void OpenGateNow() {
    gate_open_ = true;
    for (Timer* t : gate_waiters_) t->cancel();
  }

  // Waits for the gate; with `cancellable`, also stops when the stream is.
  Task<void> WaitForGate(Http2Stream& s, bool cancellable) {
    Timer timer(co_await asio::this_coro::executor);
    gate_waiters_.insert(&timer);
    if (cancellable) s.OnCancel([&timer] { timer.cancel(); });
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (!gate_open_ && !(cancellable && s.cancelled()) &&
           std::chrono::steady_clock::now() < deadline) {
      timer.expires_at(deadline);
      co_await timer.async_wait(kUseTuple);
    }
    gate_waiters_.erase(&timer);
  }

  static Task<bool> ReadAll(Http2Stream& s, std::string& out) {
    char buffer[16 * 1024];
    for (;;) {
      const Http2Read r = co_await s.ReadBody(asio::buffer(buffer), kBodyTimeout);
      if (r.ec) co_return false;
      out.append(buffer, r.bytes);
      if (r.end) co_return true;
    }
  }

  static Task<void> Respond(Http2Stream& s, http::status status, std::string body,
                            const Fields* trailers = nullptr) {
    http::response_header<Fields> head;
    head.result(status);
    if (trailers == nullptr) head.set(http::field::content_length, std::to_string(body.size()));
    if (s.SubmitResponse(head, Http2Body::kFollows)) co_return;
    if (trailers == nullptr) {
      co_await s.WriteBody(asio::buffer(body), BodyEnd::kLast, kBodyTimeout);
      co_return;
    }
    if (co_await s.WriteBody(asio::buffer(body), BodyEnd::kMore, kBodyTimeout)) co_return;
    s.SubmitTrailers(*trailers);
  }

  static std::string Pattern(std::size_t from, std::size_t n) {
    std::string out(n, '\0');
    for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<char>(((from + i) * 7 + 3) & 0xff);
    return out;
  }

  // GET /big?n=N: N bytes of h2_peer.py's body_of() pattern, 16 KiB a write.
  static Task<void> SendBig(Http2Stream& s, std::size_t n,
                            std::chrono::steady_clock::duration timeout) {
    http::response_header<Fields> head;
    head.result(http::status::ok);
    if (s.SubmitResponse(head, Http2Body::kFollows)) co_return;
    for (std::size_t sent = 0; sent < n;) {
      const std::size_t chunk = std::min<std::size_t>(16 * 1024, n - sent);
      const std::string data = Pattern(sent, chunk);
      sent += chunk;
      const ErrorCode ec = co_await s.WriteBody(
          asio::buffer(data), sent == n ? BodyEnd::kLast : BodyEnd::kMore, timeout);
      if (ec) {
        // A peer that does not open its window: the stream is reset.
        if (ec == beast::error::timeout) s.Reset(Http2ErrorCode::kCancel);
        co_return;
      }
    }
  }

  Task<void> Handle(Http2Connection& connection, Http2Stream& s) {
    ++started_;
    const std::string target(s.request().target());
    const std::string path = target.substr(0, target.find('?'));
    const std::string query = target.find('?') == std::string::npos
                                  ? ""
                                  : target.substr(target.find('?') + 1);
    std::size_t n = 0;
    if (query.rfind("n=", 0) == 0) std::from_chars(query.data() + 2, query.data() + query.size(), n);
    if (path == "/echo") {
      std::string body;
      if (!co_await ReadAll(s, body)) co_return;
      Fields trailers = s.trailers();
      co_await Respond(s, http::status::ok, std::move(body),
                       trailers.begin() == trailers.end() ? nullptr : &trailers);
    } else if (path == "/echo-stream") {
      http::response_header<Fields> head;
      head.result(http::status::ok);
      if (s.SubmitResponse(head, Http2Body::kFollows)) co_return;
      char buffer[16 * 1024];
      for (;;) {
        const Http2Read r = co_await s.ReadBody(asio::buffer(buffer), kBodyTimeout);
        if (r.ec) co_return;
        if (co_await s.WriteBody(asio::buffer(buffer, r.bytes),
                                 r.end ? BodyEnd::kLast : BodyEnd::kMore, kBodyTimeout)) {
          co_return;
        }
        if (r.end) break;
      }
    } else if (path == "/trailers") {
      Fields trailers;
      trailers.set("grpc-status", "0");
      trailers.set("X-Check", "yes");
      co_await Respond(s, http::status::ok, "hello", &trailers);
    } else if (path == "/trailers-only") {
      std::string ignored;
      co_await ReadAll(s, ignored);
      http::response_header<Fields> head;
      head.result(http::status::ok);
      head.set(http::field::content_type, "application/grpc");
      head.set("grpc-status", "8");
      head.set("grpc-message", "limited");
      s.SubmitResponse(head, Http2Body::kNone);
    } else if (path == "/hello" || path == "/204" || path == "/304") {
      const auto status = path == "/204"   ? http::status::no_content
                          : path == "/304" ? http::status::not_modified
                                           : http::status::ok;
      http::response_header<Fields> head;
      head.result(status);
      head.set(http::field::content_length, "5");
      head.set(http::field::connection, "keep-alive");  // dropped: HTTP/2 has none
      if (s.SubmitResponse(head, Http2Body::kFollows)) co_return;
      co_await s.WriteBody(asio::buffer(std::string_view("hello")), BodyEnd::kLast,
                           kBodyTimeout);
    } else if (path == "/interim") {
      http::response_header<Fields> early;
      early.result(http::status{103});
      early.set(http::field::link, "</style.css>; rel=preload");
      s.SubmitResponse(early, Http2Body::kNone);
      co_await Respond(s, http::status::ok, "final");
    } else if (path == "/info") {
      const auto& req = s.request();
      std::string out = "method=" + std::string(req.method_string()) + "\n";
      out += "target=" + std::string(req.target()) + "\n";
      out += "version=" + std::to_string(req.version()) + "\n";
      out += "scheme=" + std::string(s.scheme()) + "\n";
      out += "has_body=" + std::to_string(s.has_body()) + "\n";
      for (const auto& field : req) {
        out += "field:" + std::string(field.name_string()) + "=" + std::string(field.value()) +
               "\n";
      }
      co_await Respond(s, http::status::ok, std::move(out));
    } else if (path == "/misuse") {
      // Calls out of order fail with kWrongState and change nothing.
      const ErrorCode wrong = MakeErrorCode(Http2Errc::kWrongState);
      bool ok = co_await s.WriteBody(asio::buffer(std::string_view("x")), BodyEnd::kLast,
                                     kBodyTimeout) == wrong;
      ok &= s.SubmitTrailers(Fields{}) == wrong;
      http::response_header<Fields> head;
      head.result(http::status::switching_protocols);
      ok &= s.SubmitResponse(head, Http2Body::kFollows) == wrong;
      head.result(http::status::ok);
      ok &= !s.SubmitResponse(head, Http2Body::kFollows);
      ok &= s.SubmitResponse(head, Http2Body::kFollows) == wrong;
      const std::string body = ok ? "misuse=ok" : "misuse=failed";
      co_await s.WriteBody(asio::buffer(body), BodyEnd::kLast, kBodyTimeout);
      const bool after_end = co_await s.WriteBody(asio::buffer(body), BodyEnd::kLast,
                                                  kBodyTimeout) == wrong &&
                             s.SubmitTrailers(Fields{}) == wrong;
      std::lock_guard lock(mutex_);
      misuse_after_end_ = after_end;
      misuse_checked_ = true;
      cv_.notify_all();
    } else if (path == "/reset") {
      s.Reset(Http2ErrorCode::kCancel);
    } else if (path == "/no-response") {
      co_return;
    } else if (path == "/gate" || path == "/stubborn-gate") {
      const bool cancellable = path == "/gate";
      co_await WaitForGate(s, cancellable);
      if (s.cancelled()) {
        ++cancelled_;
        std::lock_guard lock(mutex_);
        cv_.notify_all();
        co_return;
      }
      std::string body;
      if (!co_await ReadAll(s, body)) co_return;
      co_await Respond(s, http::status::ok, "gate:" + std::to_string(body.size()));
    } else if (path == "/open-gate") {
      OpenGateNow();
      co_await Respond(s, http::status::ok, "open");
    } else if (path == "/drain") {
      connection.Shutdown();
      co_await Respond(s, http::status::ok, "draining");
    } else if (path == "/big") {
      co_await SendBig(s, n, kBodyTimeout);
    } else if (path == "/big-timeout") {
      co_await SendBig(s, n, 300ms);
    } else {
      co_await Respond(s, http::status::not_found, "");
    }
  }

  testing::TempDir dir_;
  Http2Options options_;
  asio::io_context io_{1};
  Acceptor acceptor_;
  std::optional<ssl::context> tls_;
  std::uint16_t port_ = 0;
  std::thread thread_;
  // Server thread only.
  std::set<Http2Connection*> live_;
  bool gate_open_ = false;
  std::set<Timer*> gate_waiters_;
  // Shared with the test thread.
  std::atomic<int> started_{0};
  std::atomic<int> cancelled_{0};
  bool misuse_checked_ = false;
  bool misuse_after_end_ = false;
  std::mutex mutex_;
  std::condition_variable cv_;
  int serving_ = 0;
  std::vector<Ended> ended_;
};

// Runs h2_peer.py's `scenario` against `port`: its output; fails the test
// when the script does.
std::string Peer(const std::string& scenario, std::uint16_t port) {
  std::string out;
  const int rc =
      RunCommand(kPython + " " + kPeer + " " + scenario + " " + std::to_string(port) + " 2>&1", "",
                 out);
  EXPECT_EQ(rc, 0) << scenario << ": " << out;
  return out;
}

TEST(Http2Preface, Matches) {
  EXPECT_EQ(MatchHttp2Preface(""), PrefaceMatch::kPrefix);
  EXPECT_EQ(MatchHttp2Preface("PRI * HT"), PrefaceMatch::kPrefix);
  EXPECT_EQ(MatchHttp2Preface(kHttp2Preface), PrefaceMatch::kYes);
  EXPECT_EQ(MatchHttp2Preface(std::string(kHttp2Preface) + "\x00\x00\x12\x04"),
            PrefaceMatch::kYes);
  EXPECT_EQ(MatchHttp2Preface("GET / HTTP/1.1\r\n"), PrefaceMatch::kNo);
  EXPECT_EQ(MatchHttp2Preface("PRI * HTTP/1.1\r\n"), PrefaceMatch::kNo);
}

TEST(Http2Connection, EchoesBodiesAndTrailers) {
  H2TestServer server;
  EXPECT_NE(Peer("echo", server.port()).find("echoed=1048576"), std::string::npos);
  EXPECT_NE(Peer("stream-echo", server.port()).find("echoed=262144"), std::string::npos);
}

TEST(Http2Connection, ResponseTrailersAndTrailersOnly) {
  H2TestServer server;
  const std::string out = Peer("trailers", server.port());
  EXPECT_NE(out.find("trailers=0"), std::string::npos) << out;
  EXPECT_NE(out.find("trailers_only=8"), std::string::npos) << out;
}

TEST(Http2Connection, HeadNoContentAndNotModifiedHaveNoBody) {
  H2TestServer server;
  EXPECT_NE(Peer("no-body", server.port()).find("no_body=ok"), std::string::npos);
}

TEST(Http2Connection, HandlerResetAndUnansweredStream) {
  H2TestServer server;
  EXPECT_NE(Peer("resets", server.port()).find("reset=8 unanswered=2"), std::string::npos);
}

TEST(Http2Connection, RequestHeaderFromPseudoHeaders) {
  H2TestServer server;
  const std::string out = Peer("info", server.port());
  EXPECT_NE(out.find("method=GET\n"), std::string::npos) << out;
  EXPECT_NE(out.find("target=/info?x=1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("version=20\n"), std::string::npos) << out;
  EXPECT_NE(out.find("scheme=http\n"), std::string::npos) << out;
  EXPECT_NE(out.find("has_body=0\n"), std::string::npos) << out;
  EXPECT_NE(out.find("field:Host=127.0.0.1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("field:Cookie=a=1; b=2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("field:x-custom=v\n"), std::string::npos) << out;
  EXPECT_EQ(out.find(":path"), std::string::npos) << out;
}

TEST(Http2Connection, CallsOutOfOrderFail) {
  H2TestServer server;
  const std::string out =
      Shell("curl -sS --http2-prior-knowledge " + server.http() + "/misuse");
  EXPECT_EQ(out, "misuse=ok");
  EXPECT_TRUE(server.MisuseAfterEnd());
}

TEST(Http2Connection, MalformedRequestsAreStreamErrors) {
  H2TestServer server;
  const std::string out = Peer("malformed", server.port());
  EXPECT_NE(out.find("malformed=10"), std::string::npos) << out;
  // Only two reached a handler: the well-formed one, and the one whose body
  // turns out shorter than its content-length (reset at its end).
  EXPECT_EQ(server.started(), 2);
}

TEST(Http2Connection, OversizedHeaderIsAnswered431) {
  H2TestServer server;
  EXPECT_NE(Peer("large-header", server.port()).find("too_large=431"), std::string::npos);
}

// A header block of references to one large stored value (an HPACK bomb)
// is dropped at max_header_list_bytes, and after max_oversized_headers of
// them the connection ends.
TEST(Http2Connection, HpackBombEndsTheConnectionAfterAFewBlocks) {
  H2TestServer server;
  const std::string out = Peer("hpack-bomb", server.port());
  const auto limit = Http2Options{}.max_oversized_headers;
  EXPECT_NE(out.find("goaway=11 "), std::string::npos) << out;
  // The last one may be answered before the GOAWAY or not.
  std::smatch answered;
  ASSERT_TRUE(std::regex_search(out, answered, std::regex("answered_431=([0-9]+)"))) << out;
  EXPECT_GE(std::stoul(answered[1]), limit) << out;
  EXPECT_LE(std::stoul(answered[1]), limit + 1) << out;
  ASSERT_TRUE(server.WaitForEnded(1));
  EXPECT_EQ(server.ended()[0].reason, Http2CloseReason::kHeaderFlood)
      << ToString(server.ended()[0].reason);
  EXPECT_EQ(server.ended()[0].stats.header_too_large, limit + 1);
}

TEST(Http2Connection, SlowHandlerSlowsOnlyItsStream) {
  H2TestServer server;
  const std::string out = Peer("slow-handler", server.port());
  EXPECT_NE(out.find("held="), std::string::npos) << out;
}

TEST(Http2Connection, SlowReaderSlowsOnlyItsStream) {
  H2TestServer server;
  EXPECT_NE(Peer("slow-reader", server.port()).find("a_before_ack="), std::string::npos);
}

TEST(Http2Connection, StreamWhoseWindowNeverOpensIsReset) {
  H2TestServer server;
  EXPECT_NE(Peer("zero-window", server.port()).find("stalled_reset=8"), std::string::npos);
}

TEST(Http2Connection, PeerResetCancelsTheHandler) {
  H2TestServer server;
  Peer("client-reset", server.port());
  EXPECT_TRUE(server.WaitFor([&] { return server.cancelled() == 1; }));
}

TEST(Http2Connection, StreamsBeyondTheLimitAreRefused) {
  H2TestServer server;
  const std::string out = Peer("too-many-streams", server.port());
  EXPECT_NE(out.find("ok=128 refused=72"), std::string::npos) << out;
}

// A client that goes past the limit it has acknowledged loses only the
// streams beyond it (REFUSED_STREAM), not the connection.
TEST(Http2Connection, StreamsBeyondTheAcknowledgedLimitAreRefused) {
  H2TestServer server;
  const std::string out = Peer("beyond-acknowledged-limit", server.port());
  EXPECT_NE(out.find("ok=128 refused=2"), std::string::npos) << out;
}

TEST(Http2Connection, HeadersOnALowerStreamIdIsAConnectionError) {
  H2TestServer server;
  const std::string out = Peer("reused-stream-id", server.port());
  EXPECT_NE(out.find("status5=200 goaway=1 last_stream=5"), std::string::npos) << out;
  ASSERT_TRUE(server.WaitForEnded(1));
  EXPECT_EQ(server.ended()[0].reason, Http2CloseReason::kProtocolError)
      << ToString(server.ended()[0].reason);
}

TEST(Http2Connection, ResetStreamsCountUntilTheirHandlersEnd) {
  H2TestServer server;
  EXPECT_NE(Peer("reset-keeps-count", server.port()).find("refused=10"), std::string::npos);
}

TEST(Http2Connection, ShutdownSendsGoawayAndLetsStreamsFinish) {
  H2TestServer server;
  EXPECT_NE(Peer("drain", server.port()).find("goaways=2"), std::string::npos);
  ASSERT_TRUE(server.WaitForEnded(2));
  bool drained = false;
  for (const Ended& e : server.ended()) drained |= e.reason == Http2CloseReason::kDone;
  EXPECT_TRUE(drained);
}

TEST(Http2Connection, IdleConnectionIsClosedWithGoaway) {
  Http2Options options;
  options.idle_timeout = 200ms;
  H2TestServer server(options);
  EXPECT_NE(Peer("idle", server.port()).find("idle_goaway=0"), std::string::npos);
  ASSERT_TRUE(server.WaitForEnded(1));
  EXPECT_EQ(server.ended()[0].reason, Http2CloseReason::kIdle);
}

// Floods end in GOAWAY ENHANCE_YOUR_CALM after a bounded amount of work.
struct Flood {
  const char* scenario;
  Http2CloseReason reason;
};

class Http2Flood : public ::testing::TestWithParam<Flood> {};

TEST_P(Http2Flood, EndsWithEnhanceYourCalm) {
  Http2Options options;
  H2TestServer server(options);
  const std::string out = Peer(GetParam().scenario, server.port());
  EXPECT_NE(out.find("goaway=11 "), std::string::npos) << out;
  ASSERT_TRUE(server.WaitForEnded(1));
  EXPECT_EQ(server.ended()[0].reason, GetParam().reason) << ToString(server.ended()[0].reason);
  // Streams opened and reset in the same read never start a handler; the
  // rest are bounded by the reset budget.
  EXPECT_LE(server.started(), static_cast<int>(options.reset_burst)) << out;
}

INSTANTIATE_TEST_SUITE_P(
    Floods, Http2Flood,
    ::testing::Values(Flood{"rapid-reset", Http2CloseReason::kRapidReset},
                      Flood{"continuation-flood", Http2CloseReason::kControlFlood},
                      Flood{"ping-flood", Http2CloseReason::kControlFlood},
                      Flood{"settings-flood", Http2CloseReason::kControlFlood},
                      Flood{"empty-data-flood", Http2CloseReason::kControlFlood}),
    [](const auto& info) {
      std::string name = info.param.scenario;
      std::erase(name, '-');
      return name;
    });

// Real clients: nghttp, curl (prior knowledge and TLS with ALPN), h2load.
TEST(Http2Peers, Nghttp) {
  H2TestServer server;
  const std::string out = Shell("nghttp -nv " + server.http() + "/trailers");
  EXPECT_NE(out.find("recv HEADERS frame"), std::string::npos) << out;
  EXPECT_NE(out.find("grpc-status: 0"), std::string::npos) << out;
  testing::TempDir dir;
  const std::string file = dir.Write("body", std::string(100'000, 'x'));
  const std::string echo = Shell("nghttp -d " + file + " " + server.http() + "/echo | wc -c");
  EXPECT_NE(echo.find("100000"), std::string::npos) << echo;
}

TEST(Http2Peers, CurlPriorKnowledge) {
  H2TestServer server;
  const std::string info =
      Shell("curl -sS --http2-prior-knowledge -b 'a=1; b=2' " + server.http() + "/info");
  EXPECT_NE(info.find("version=20\n"), std::string::npos) << info;
  EXPECT_NE(info.find("field:Cookie=a=1; b=2\n"), std::string::npos) << info;
  testing::TempDir dir;
  const std::string file = dir.Write("body", std::string(300'000, 'y'));
  const std::string echo = Shell("curl -sS --http2-prior-knowledge --data-binary @" + file + " " +
                               server.http() + "/echo | wc -c");
  EXPECT_NE(echo.find("300000"), std::string::npos) << echo;
  const std::string head =
      Shell("curl -sS --http2-prior-knowledge -I " + server.http() + "/hello");
  EXPECT_NE(head.find("HTTP/2 200"), std::string::npos) << head;
  EXPECT_NE(head.find("content-length: 5"), std::string::npos) << head;
  EXPECT_EQ(head.find("connection"), std::string::npos) << head;
}

TEST(Http2Peers, CurlOverTlsWithAlpn) {
  H2TestServer server({}, H2TestServer::Tls::kYes);
  testing::TempDir dir;
  const std::string file = dir.Write("body", std::string(200'000, 'z'));
  const std::string out = Shell("curl -sS -k --http2 -w '%{http_version}' --data-binary @" + file +
                              " " + server.https() + "/echo | tail -c 1");
  EXPECT_EQ(out, "2") << out;
  const std::string trailers = Shell("curl -sS -k --http2 -v " + server.https() + "/trailers");
  EXPECT_NE(trailers.find("grpc-status: 0"), std::string::npos) << trailers;
}

// 200 streams in flight over two connections (100 each), 2000 requests.
TEST(Http2Peers, H2loadManyConcurrentStreams) {
  H2TestServer server;
  const std::string out = Shell("h2load -n 2000 -c 2 -m 100 " + server.http() + "/hello");
  EXPECT_NE(out.find("2000 total, 2000 started, 2000 done, 2000 succeeded, 0 failed, 0 errored"),
            std::string::npos)
      << out;
  testing::TempDir dir;
  const std::string file = dir.Write("body", std::string(10'000, 'p'));
  const std::string posts =
      Shell("h2load -n 1000 -c 2 -m 100 -d " + file + " " + server.http() + "/echo");
  EXPECT_NE(posts.find("1000 succeeded, 0 failed, 0 errored"), std::string::npos) << posts;
}

TEST(Http2Peers, H2loadOverTls) {
  H2TestServer server({}, H2TestServer::Tls::kYes);
  const std::string out = Shell("h2load -n 1000 -c 2 -m 100 " + server.https() + "/hello");
  EXPECT_NE(out.find("1000 succeeded, 0 failed, 0 errored"), std::string::npos) << out;
  EXPECT_NE(out.find("Application protocol: h2"), std::string::npos) << out;
}

}  // namespace
}  // namespace tollgate::gateway
