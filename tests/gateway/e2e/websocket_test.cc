// WebSocket through the gateway, with real peers: Debian's python3-websockets
// (run with /usr/bin/python3) as the echo server (websocket_echo.py) and as
// the client (websocket_client.py), tollgate in between on plain and TLS
// listeners; a raw upstream for a wrong Sec-WebSocket-Accept.
#include <gtest/gtest.h>
#include <signal.h>

#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <fstream>
#include <functional>
#include <future>
#include <regex>
#include <sstream>
#include <thread>

#include "prometheus.h"
#include "test_support.h"

namespace tollgate::testing {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

const std::string kPython = "/usr/bin/python3";
const std::string kScripts = TOLLGATE_WEBSOCKET_SCRIPTS;

// The RFC 6455 §1.3 example: this key calls for this accept.
constexpr const char* kKey = "dGhlIHNhbXBsZSBub25jZQ==";
constexpr const char* kAccept = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

enum class EchoCompression { kNone, kPerMessageDeflate };

// websocket_echo.py on a free port.
class EchoServer : public WebSocketEcho {
 public:
  explicit EchoServer(EchoCompression compression = EchoCompression::kNone)
      : WebSocketEcho(kScripts + "/websocket_echo.py",
                      compression == EchoCompression::kNone
                          ? std::vector<std::string>{}
                          : std::vector<std::string>{"--deflate"}) {}
};

// websocket_client.py URL SCENARIO ARGS: its exit code; stdout and stderr
// in `out`.
int RunClient(const std::string& url, const std::string& args, std::string& out) {
  return RunCommand(kPython + " " + kScripts + "/websocket_client.py " + url + " " + args, "", out);
}

std::string Handshake(const std::string& target, const std::string& extra = "") {
  return "GET " + target +
         " HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Key: " +
         kKey + "\r\nSec-WebSocket-Version: 13\r\n" + extra + "\r\n";
}

int Count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (std::size_t at = 0; (at = text.find(needle, at)) != std::string::npos; at += needle.size()) {
    ++n;
  }
  return n;
}

// A raw upstream for one tunnel: answers kKey's handshake with 101 and
// `after_101` in the same write, then runs `script` on the connection, by
// default keeping every byte it receives until the gateway ends it.
class RawUpstream {
 public:
  using Script = std::function<void(tcp::socket&, std::string& received)>;
  explicit RawUpstream(std::string after_101 = "", Script script = KeepAll)
      : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
        thread_([this, after_101, script] { Serve(after_101, script); }) {}
  ~RawUpstream() {
    if (thread_.joinable()) thread_.join();
  }
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  // What the script kept, once it is done.
  std::string Received() {
    thread_.join();
    return received_;
  }

  static void KeepAll(tcp::socket& socket, std::string& received) {
    char chunk[4096];
    boost::system::error_code ec;
    for (;;) {
      const std::size_t n = socket.read_some(asio::buffer(chunk), ec);
      if (ec) break;
      received.append(chunk, n);
    }
  }

 private:
  void Serve(const std::string& after_101, const Script& script) {
    tcp::socket socket(io_);
    acceptor_.accept(socket);
    asio::streambuf request;
    boost::system::error_code ec;
    // (The clients here send nothing before the 101.)
    asio::read_until(socket, request, "\r\n\r\n", ec);
    const std::string answer = std::string(
                                   "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                                   "Connection: Upgrade\r\nSec-WebSocket-Accept: ") +
                               kAccept + "\r\n\r\n" + after_101;
    asio::write(socket, asio::buffer(answer), ec);
    script(socket, received_);
  }

  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::string received_;
  std::thread thread_;
};

class WebSocketTest : public ::testing::Test {
 protected:
  void Start(const std::string& extra = "", const std::string& route_extra = "") {
    std::string config = BasicConfig(route_extra + extra);
    gateway_ = std::make_unique<TestGateway>(config, echo_.port(), TestClock::kSteady);
  }
  std::string Url(const std::string& path = "/") const {
    return "ws://127.0.0.1:" + std::to_string(gateway_->port()) + path;
  }

  EchoServer echo_;
  std::unique_ptr<TestGateway> gateway_;
};

TEST_F(WebSocketTest, MessagesBothWaysUpToOneMebibyte) {
  Start();
  std::string out;
  EXPECT_EQ(RunClient(Url(), "messages", out), 0) << out;
  EXPECT_NE(out.find("echoed 1048576"), std::string::npos) << out;
}

TEST_F(WebSocketTest, FragmentedMessagesPingPongAndTheCloseHandshake) {
  Start();
  std::string out;
  EXPECT_EQ(RunClient(Url(), "fragmented", out), 0) << out;
  out.clear();
  EXPECT_EQ(RunClient(Url(), "ping", out), 0) << out;
  out.clear();
  EXPECT_EQ(RunClient(Url(), "close", out), 0) << out;
  EXPECT_NE(out.find("client close 1000"), std::string::npos) << out;
  EXPECT_NE(out.find("server close 4001 bye"), std::string::npos) << out;
}

TEST_F(WebSocketTest, TwoHundredTunnelsAtOnce) {
  Start();
  std::string out;
  EXPECT_EQ(RunClient(Url(), "many 200", out), 0) << out;
  EXPECT_NE(out.find("open 200"), std::string::npos) << out;
  EXPECT_NE(out.find("closed 200"), std::string::npos) << out;
}

TEST_F(WebSocketTest, TheHandshakeGoesUpWithItsUpgradeFieldsAndTheAnswerComesBack) {
  Start();
  Client client(gateway_->port());
  client.Send(Handshake("/"));
  Response res = client.Read();
  EXPECT_EQ(res.result_int(), 101);
  EXPECT_EQ(res[http::field::upgrade], "websocket");
  EXPECT_EQ(res[http::field::connection], "Upgrade");
  EXPECT_EQ(res[http::field::sec_websocket_accept], kAccept);
  // Tokens in lists and in any case (Firefox sends "keep-alive, Upgrade").
  Client firefox(gateway_->port());
  std::string request = Handshake("/");
  request.replace(request.find("Upgrade: websocket"), 18, "Upgrade: WebSocket");
  request.replace(request.find("Connection: Upgrade"), 19, "Connection: keep-alive, Upgrade");
  firefox.Send(request);
  EXPECT_EQ(firefox.Read().result_int(), 101);
}

TEST(WebSocket, AnUpstreamThatDoesNotSwitchIsRelayedAsAResponse) {
  // The HTTP echo upstream answers a handshake with 200 and the fields it got.
  auto echo = StartEcho();
  TestGateway gateway(BasicConfig(), echo->port());
  Client client(gateway.port());
  client.Send(Handshake("/_test/headers"));
  Response res = client.Read();
  EXPECT_EQ(res.result_int(), 200);
  EXPECT_NE(res.body().find("\"Upgrade\":\"websocket\""), std::string::npos) << res.body();
  EXPECT_NE(res.body().find("\"Connection\":\"Upgrade\""), std::string::npos) << res.body();
  EXPECT_NE(res.body().find(kKey), std::string::npos) << res.body();
  // A request that is no handshake still loses its Upgrade.
  Response plain = client.Get("/_test/headers", "Upgrade: h2c\r\nConnection: Upgrade\r\n");
  EXPECT_EQ(plain.body().find("h2c"), std::string::npos) << plain.body();
}

TEST_F(WebSocketTest, AHandshakeIsRateLimitedLikeAnyRequest) {
  Start(R"(
[[rules]]
name = "ws"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1h"
)");
  Client first(gateway_->port());
  first.Send(Handshake("/"));
  EXPECT_EQ(first.Read().result_int(), 101);
  Client second(gateway_->port());
  second.Send(Handshake("/"));
  Response res = second.Read();
  EXPECT_EQ(res.result_int(), 429);
  EXPECT_NE(res.body().find("rate_limited"), std::string::npos);
  EXPECT_EQ(res["RateLimit-Policy"], "\"ws\";q=1;w=3600");
  EXPECT_NE(res["RateLimit"].find("\"ws\";r=0"), std::string::npos);
  EXPECT_FALSE(res[http::field::retry_after].empty());
  std::string out;
  EXPECT_NE(RunClient(Url(), "ping", out), 0);
  EXPECT_NE(out.find("429"), std::string::npos) << out;
}

TEST_F(WebSocketTest, MaxInflightCountsOpenTunnelsPerUser) {
  Start(R"(
[identity]
trusted_proxies = ["127.0.0.1/32"]
user_header = "X-User-Id"
[[rules]]
name = "five-sockets"
key = "user"
max_inflight = 5
)");
  // alice holds five tunnels; her sixth handshake is refused while they are
  // open, bob's are not.
  auto alice = std::async(std::launch::async, [&] {
    std::string out;
    RunClient(Url(), "hold 6 2 --header X-User-Id:alice", out);
    return out;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  std::string bob;
  EXPECT_EQ(RunClient(Url(), "hold 2 0 --header X-User-Id:bob", bob), 0) << bob;
  EXPECT_EQ(Count(bob, "open "), 2) << bob;
  const std::string out = alice.get();
  for (int i = 0; i < 5; ++i) {
    EXPECT_NE(out.find("open " + std::to_string(i) + "\n"), std::string::npos) << out;
  }
  EXPECT_NE(out.find("refused 5 429"), std::string::npos) << out;
  // Closed tunnels give their places back.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::string again;
  EXPECT_EQ(RunClient(Url(), "hold 5 0 --header X-User-Id:alice", again), 0) << again;
  EXPECT_EQ(Count(again, "open "), 5) << again;
}

TEST_F(WebSocketTest, AnUpstreamsMaxConnectionsCountsOpenTunnels) {
  std::string config = BasicConfig();
  config.replace(config.find("[[routes]]"), 10, "max_connections = 2\n[[routes]]");
  gateway_ = std::make_unique<TestGateway>(config, echo_.port(), TestClock::kSteady);
  std::string out;
  RunClient(Url(), "hold 3 0", out);
  EXPECT_EQ(Count(out, "open "), 2) << out;
  EXPECT_NE(out.find("refused 2 503"), std::string::npos) << out;
}

TEST_F(WebSocketTest, AnIdleTunnelIsClosed) {
  Start("[timeouts]\nwebsocket_idle = \"500ms\"\n");
  std::string out;
  EXPECT_EQ(RunClient(Url(), "idle 10", out), 0) << out;
  std::smatch match;
  // Closed by the gateway (the client would give up after its 10 s), and
  // not before the idle time (a lower bound: a loaded machine only makes
  // `after` longer).
  ASSERT_TRUE(std::regex_search(out, match, std::regex("closed after ([0-9.]+)"))) << out;
  EXPECT_GE(std::stod(match[1]), 0.4);
  // Traffic keeps it open: messages spread over longer than the idle time.
  out.clear();
  EXPECT_EQ(RunClient(Url(), "messages", out), 0) << out;
}

TEST_F(WebSocketTest, ARouteWithoutWebSocketRefusesTheHandshake) {
  std::string config = BasicConfig("websocket = false\n");
  gateway_ = std::make_unique<TestGateway>(config, echo_.port(), TestClock::kSteady);
  Client client(gateway_->port());
  client.Send(Handshake("/"));
  Response res = client.Read();
  EXPECT_EQ(res.result_int(), 400);
  EXPECT_NE(res.body().find("\"error\":\"websocket_disabled\""), std::string::npos) << res.body();
}

TEST(WebSocket, AWrongAcceptFromTheUpstreamIs502) {
  // A raw upstream that switches with a wrong Sec-WebSocket-Accept.
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const std::uint16_t upstream_port = acceptor.local_endpoint().port();
  std::promise<std::string> seen;
  std::thread server([&] {
    tcp::socket socket(io);
    acceptor.accept(socket);
    asio::streambuf request;
    boost::system::error_code ec;
    asio::read_until(socket, request, "\r\n\r\n", ec);
    seen.set_value(
        std::string(asio::buffers_begin(request.data()), asio::buffers_end(request.data())));
    const std::string answer =
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Accept: dGhpcyBpcyBub3QgaXQ=\r\n\r\n";
    asio::write(socket, asio::buffer(answer), ec);
    char c;
    socket.read_some(asio::buffer(&c, 1), ec);  // until the gateway closes
  });
  {
    TestGateway gateway(BasicConfig(), upstream_port);
    Client client(gateway.port());
    client.Send(Handshake("/"));
    Response res = client.Read();
    EXPECT_EQ(res.result_int(), 502);
    EXPECT_NE(res.body().find("bad_gateway"), std::string::npos);
    const std::string request = seen.get_future().get();
    EXPECT_NE(request.find("Upgrade: websocket\r\n"), std::string::npos) << request;
    EXPECT_NE(request.find("Connection: Upgrade\r\n"), std::string::npos) << request;
  }
  server.join();
}

TEST(WebSocket, BytesAfterThe101AndBackpressure) {
  // A raw upstream that switches correctly, with a frame in the same write
  // as its 101, then reads nothing until told to.
  std::promise<void> start_reading;
  std::promise<std::uint64_t> received;
  RawUpstream upstream("\x81\x05hello", [&](tcp::socket& socket, std::string&) {
    start_reading.get_future().wait();
    std::uint64_t n = 0;
    char chunk[65536];
    boost::system::error_code ec;
    for (;;) {
      const std::size_t got = socket.read_some(asio::buffer(chunk), ec);
      if (ec) break;
      n += got;
    }
    received.set_value(n);
  });
  TestGateway gateway(BasicConfig(), upstream.port());
  Client client(gateway.port());
  client.Send(Handshake("/"));
  Response res = client.Read();
  ASSERT_EQ(res.result_int(), 101);
  std::string frame(static_cast<const char*>(client.buffer().data().data()),
                    client.buffer().size());
  while (frame.size() < 7) {
    char c[16];
    frame.append(c, client.socket().read_some(asio::buffer(c, 7 - frame.size())));
  }
  EXPECT_EQ(frame, "\x81\x05hello");

  // The upstream does not read: the client's writes stall once the socket
  // buffers on the way and one relay buffer are full.
  client.socket().non_blocking(true);
  const std::string chunk(64 * 1024, 'x');
  std::uint64_t sent = 0;
  auto last_progress = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - last_progress < std::chrono::milliseconds(500) &&
         sent < (512u << 20)) {
    boost::system::error_code ec;
    const std::size_t n = client.socket().write_some(asio::buffer(chunk), ec);
    if (ec == asio::error::would_block) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    ASSERT_FALSE(ec) << ec.message();
    sent += n;
    last_progress = std::chrono::steady_clock::now();
  }
  EXPECT_LT(sent, 64u << 20) << "the gateway kept reading from the client";
  // Once the upstream reads, everything arrives, then the end.
  start_reading.set_value();
  client.socket().non_blocking(false);
  asio::write(client.socket(), asio::buffer(chunk));
  sent += chunk.size();
  client.socket().shutdown(tcp::socket::shutdown_send);
  EXPECT_EQ(received.get_future().get(), sent);
}

TEST_F(WebSocketTest, ThroughATlsListener) {
  TempDir dir;
  auto [cert, key] = MakeCertificate(dir, "ws.test");
  std::string config = BasicConfig();
  config.replace(
      config.find("address = \"127.0.0.1:0\""), 23,
      "address = \"127.0.0.1:0\"\ntls = [ { cert = \"" + cert + "\", key = \"" + key + "\" } ]");
  gateway_ = std::make_unique<TestGateway>(config, echo_.port(), TestClock::kSteady);
  const std::string url = "wss://127.0.0.1:" + std::to_string(gateway_->port()) + "/";
  for (const char* scenario : {"messages", "fragmented", "ping", "close", "many 20"}) {
    std::string out;
    EXPECT_EQ(RunClient(url, std::string(scenario) + " --cafile " + cert, out), 0)
        << scenario << ": " << out;
  }
}

TEST_F(WebSocketTest, ThroughTlsOnBothSides) {
  // wss to a gateway whose upstream is a TLS-terminating gateway in front of
  // the echo server: TLS on both sides of the outer gateway's tunnels.
  TempDir dir;
  auto [cert, key] = MakeCertificate(dir, "upstream.test");
  std::string inner_config = BasicConfig();
  inner_config.replace(
      inner_config.find("address = \"127.0.0.1:0\""), 23,
      "address = \"127.0.0.1:0\"\ntls = { cert = \"" + cert + "\", key = \"" + key + "\" }");
  TestGateway inner(inner_config, echo_.port(), TestClock::kSteady);
  std::string outer_config = BasicConfig();
  outer_config.replace(
      outer_config.find("address = \"127.0.0.1:0\""), 23,
      "address = \"127.0.0.1:0\"\ntls = { cert = \"" + cert + "\", key = \"" + key + "\" }");
  outer_config.replace(outer_config.find("servers = [\"127.0.0.1:{ECHO}\"]"), 30,
                       "servers = [\"127.0.0.1:{ECHO}\"]\ntls = { verify = true, ca_file = \"" +
                           cert + "\", sni = \"upstream.test\" }");
  TestGateway outer(outer_config, inner.port(), TestClock::kSteady);
  const std::string url = "wss://127.0.0.1:" + std::to_string(outer.port()) + "/";
  for (const char* scenario : {"messages", "fragmented", "close", "many 20"}) {
    std::string out;
    EXPECT_EQ(RunClient(url, std::string(scenario) + " --cafile " + cert, out), 0)
        << scenario << ": " << out;
  }
}

TEST_F(WebSocketTest, OneAccessLogLinePerTunnelAndMetrics) {
  TempDir dir;
  const std::string log = dir.path() + "/access.log";
  std::string config = BasicConfig();
  config.replace(config.find("access = \"off\""), 14, "access = \"" + log + "\"");
  gateway_ = std::make_unique<TestGateway>(config, echo_.port(), TestClock::kSteady);
  auto held = std::async(std::launch::async, [&] {
    std::string out;
    RunClient(Url("/held"), "hold 3 1.5", out);
    return out;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(900));
  Client admin(gateway_->admin_port());
  const std::string during = admin.Get("/metrics").body();
  EXPECT_EQ(Sample(during, "tollgate_websocket_connections{route=\"/\"}"), 3) << during;
  EXPECT_EQ(Count(held.get(), "open "), 3);

  std::string out;
  ASSERT_EQ(RunClient(Url(), "messages", out), 0) << out;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::string after = admin.Get("/metrics").body();
  EXPECT_EQ(Sample(after, "tollgate_websocket_connections{route=\"/\"}"), 0) << after;
  // Text and binary of each size, each way, plus frame headers and the
  // 3 x "hi" of the held tunnels.
  const double in = Sample(after, "tollgate_websocket_bytes_total{route=\"/\",direction=\"in\"}");
  const double out_bytes =
      Sample(after, "tollgate_websocket_bytes_total{route=\"/\",direction=\"out\"}");
  constexpr double kPayload = 2 * 1'280'026;  // 0 + 1 + 125 + ... + 1048576, twice
  EXPECT_GT(in, kPayload) << after;
  EXPECT_GT(out_bytes, kPayload) << after;
  EXPECT_LT(in, kPayload + 10'000) << after;

  // The lines reach the file at the next flush (every second); the 30 s
  // only end a test that would hang.
  std::string text;
  for (int i = 0; i < 300 && Count(text, "\" 101 ") < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::ifstream file(log);
    text.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  }
  EXPECT_EQ(Count(text, "\"GET /held HTTP/1.1\" 101 "), 3) << text;
  std::smatch match;
  ASSERT_TRUE(std::regex_search(text, match,
                                std::regex("\"GET / HTTP/1.1\" 101 ([0-9]+) .* rt=([0-9.]+) .* "
                                           "in=([0-9]+)")))
      << text;
  EXPECT_GT(std::stod(match[1]), kPayload);  // bytes to the client
  EXPECT_GT(std::stod(match[3]), kPayload);  // bytes from the client
  std::smatch held_match;
  ASSERT_TRUE(std::regex_search(text, held_match,
                                std::regex("\"GET /held HTTP/1.1\" 101 [0-9]+ .* rt=([0-9.]+)")));
  EXPECT_GE(std::stod(held_match[1]), 1.0);  // the tunnel's whole life
}

TEST(WebSocket, DrainClosesTunnelsAtTheDrainTimeout) {
  EchoServer echo;
  TempDir dir;
  std::string config = BasicConfig();
  config.replace(config.find("threads = 1"), 11, "threads = 1\ndrain_timeout = \"1s\"");
  const std::string file = dir.Write("tollgate.toml", WithEchoPort(config, echo.port()));
  Process gateway({TOLLGATE_BINARY, "--config", file});
  const std::uint16_t port = WaitForPort(gateway);
  auto client = std::async(std::launch::async, [port] {
    std::string out;
    RunClient("ws://127.0.0.1:" + std::to_string(port) + "/", "idle 20", out);
    return out;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  const auto start = std::chrono::steady_clock::now();
  gateway.Signal(SIGTERM);
  const int code = gateway.Wait();
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(code, 0);
  // The tunnel is no idle connection: it lives until the timeout. (A lower
  // bound: a loaded machine only makes `took` longer.)
  EXPECT_GE(took, 0.9);
  // And the timeout ends it: the client saw it closed before its own 20 s.
  const std::string out = client.get();
  EXPECT_NE(out.find("closed after"), std::string::npos) << out;
}

// Message-rate limits (per = "message").

// A masked client frame.
std::string MaskedFrame(char first, const std::string& payload) {
  const char key[4] = {0x11, 0x22, 0x33, 0x44};
  std::string out{first, static_cast<char>(0x80 | payload.size()), key[0], key[1], key[2], key[3]};
  for (std::size_t i = 0; i < payload.size(); ++i)
    out += static_cast<char>(payload[i] ^ key[i % 4]);
  return out;
}

constexpr const char* kFiveMessagesADay = R"(
[[rules]]
name = "messages"
key = "ip"
algorithm = "fixed_window"
limit = 5
window = "1d"
per = "message"
)";

TEST_F(WebSocketTest, ARejectRuleClosesWith1008AfterExactlyItsLimit) {
  TempDir dir;
  const std::string log = dir.path() + "/access.log";
  std::string config = BasicConfig(kFiveMessagesADay);
  config.replace(config.find("access = \"off\""), 14, "access = \"" + log + "\"");
  gateway_ = std::make_unique<TestGateway>(config, echo_.port(), TestClock::kSteady);
  std::string out;
  EXPECT_EQ(RunClient(Url(), "send 8 plain", out), 0) << out;
  // The handshake is a request, not a message: five messages pass.
  EXPECT_NE(out.find("echoed 4\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("echoed 5"), std::string::npos) << out;
  EXPECT_NE(out.find("closed 1008 rate_limited after 5"), std::string::npos) << out;

  Client admin(gateway_->admin_port());
  const std::string metrics = admin.Get("/metrics").body();
  EXPECT_EQ(
      Sample(metrics, R"(tollgate_ratelimit_decisions_total{rule="messages",decision="allowed"})"),
      5)
      << metrics;
  EXPECT_EQ(
      Sample(metrics, R"(tollgate_ratelimit_decisions_total{rule="messages",decision="limited"})"),
      1)
      << metrics;
  std::string text;
  for (int i = 0; i < 300 && text.find("websocket_rate_limited") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::ifstream file(log);
    text.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  }
  EXPECT_NE(text.find("\"GET / HTTP/1.1\" 101 "), std::string::npos) << text;
  EXPECT_NE(text.find("websocket_rate_limited"), std::string::npos) << text;
}

TEST_F(WebSocketTest, ARejectRuleThroughATlsListener) {
  TempDir dir;
  auto [cert, key] = MakeCertificate(dir, "ws.test");
  std::string config = BasicConfig(kFiveMessagesADay);
  config.replace(
      config.find("address = \"127.0.0.1:0\""), 23,
      "address = \"127.0.0.1:0\"\ntls = { cert = \"" + cert + "\", key = \"" + key + "\" }");
  gateway_ = std::make_unique<TestGateway>(config, echo_.port(), TestClock::kSteady);
  const std::string url = "wss://127.0.0.1:" + std::to_string(gateway_->port()) + "/";
  std::string out;
  EXPECT_EQ(RunClient(url, "send 8 plain --cafile " + cert, out), 0) << out;
  EXPECT_NE(out.find("closed 1008 rate_limited after 5"), std::string::npos) << out;
}

TEST_F(WebSocketTest, AFragmentedMessageCountsOnceAndControlFramesNever) {
  Start(R"(
[[rules]]
name = "fragments"
match = { path_prefix = "/fragments" }
key = "ip"
algorithm = "fixed_window"
limit = 3
window = "1d"
per = "message"
[[rules]]
name = "pings"
match = { path_prefix = "/pings" }
key = "ip"
algorithm = "sliding_log"
limit = 3
window = "1d"
per = "message"
)");
  // Each message in three fragments; three pings answered before each.
  std::string out;
  EXPECT_EQ(RunClient(Url("/fragments"), "send 5 fragmented", out), 0) << out;
  EXPECT_NE(out.find("echoed 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("closed 1008 rate_limited after 3"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(RunClient(Url("/pings"), "send 5 pinged", out), 0) << out;
  EXPECT_NE(out.find("echoed 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("closed 1008 rate_limited after 3"), std::string::npos) << out;
}

TEST_F(WebSocketTest, ADelayRuleHoldsMessagesToItsRateAndLosesNone) {
  // 20 a second, no burst: a message every 50 ms.
  Start(R"(
[[rules]]
name = "paced"
key = "ip"
algorithm = "token_bucket"
limit = 20
window = "1s"
burst = 1
per = "message"
action = "delay"
max_delay = "5s"
)");
  std::string out;
  ASSERT_EQ(RunClient(Url(), "burst 11", out), 0) << out;
  std::smatch match;
  ASSERT_TRUE(std::regex_search(out, match, std::regex("received ([0-9]+) in ([0-9.]+)"))) << out;
  EXPECT_EQ(match[1], "11") << out;
  EXPECT_EQ(out.find("closed"), std::string::npos) << out;
  // The first passes at once, each of the ten others 50 ms after the one
  // before it.
  EXPECT_GE(std::stod(match[2]), 0.5 - 0.05) << out;
}

TEST_F(WebSocketTest, ADelayRuleClosesWith1008WhenTheWaitWouldPassMaxDelay) {
  Start(R"(
[[rules]]
name = "one-a-day"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1d"
per = "message"
action = "delay"
max_delay = "200ms"
)");
  std::string out;
  EXPECT_EQ(RunClient(Url(), "send 3 plain", out), 0) << out;
  EXPECT_NE(out.find("closed 1008 rate_limited after 1"), std::string::npos) << out;
}

TEST_F(WebSocketTest, AMessageAboveTheLimitClosesWith1009) {
  Start(R"(
[limits]
max_websocket_message_bytes = 1000
[[rules]]
name = "messages"
match = { path_prefix = "/limited" }
key = "ip"
algorithm = "fixed_window"
limit = 100
window = "1d"
per = "message"
)");
  std::string out;
  EXPECT_EQ(RunClient(Url("/limited"), "oversize 1000", out), 0) << out;
  EXPECT_NE(out.find("echoed"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(RunClient(Url("/limited"), "oversize 1001", out), 0) << out;
  EXPECT_NE(out.find("closed 1009 message_too_big"), std::string::npos) << out;
  // A tunnel without message rules is a byte relay: no limit of its own.
  out.clear();
  EXPECT_EQ(RunClient(Url("/"), "oversize 5000", out), 0) << out;
  EXPECT_NE(out.find("echoed"), std::string::npos) << out;
}

TEST(WebSocket, AnUnmaskedClientFrameClosesWith1002BothWays) {
  RawUpstream upstream;
  TestGateway gateway(BasicConfig(kFiveMessagesADay), upstream.port(), TestClock::kSteady);
  Client client(gateway.port());
  client.Send(Handshake("/"));
  ASSERT_EQ(client.Read().result_int(), 101);
  const std::string masked = MaskedFrame('\x81', "fine");
  client.Send(masked + "\x81\x05hello");
  // The client gets an unmasked close frame, 1002 "protocol_error"; the
  // upstream the message before it, then a masked close frame with the same.
  EXPECT_EQ(client.ReadToClose(), std::string("\x88\x10\x03\xeaprotocol_error", 18));
  client.socket().close();  // the gateway lingers until the client closes too
  const std::string received = upstream.Received();
  ASSERT_EQ(received.size(), masked.size() + 2 + 4 + 16) << received;
  EXPECT_EQ(received.substr(0, masked.size()), masked);
  const std::string close = received.substr(masked.size());
  EXPECT_EQ(close.substr(0, 2), "\x88\x90");
  std::string payload;
  for (std::size_t i = 0; i < 16; ++i)
    payload += static_cast<char>(close[6 + i] ^ close[2 + i % 4]);
  EXPECT_EQ(payload, std::string("\x03\xeaprotocol_error", 16));
}

TEST(WebSocket, TheClientsCloseFrameWaitsForTheEndOfTheFrameUnderWay) {
  // An upstream that has sent half a frame when the client is limited: the
  // rest of that frame reaches the client, then tollgate's close frame, and
  // nothing after (not the upstream's own close frame).
  const std::string first = MaskedFrame('\x81', "one");
  RawUpstream upstream(
      std::string("\x82\x14") + "0123456789", [&](tcp::socket& socket, std::string& received) {
        // The client's first message, then tollgate's masked
        // close frame; then the rest of the frame and a close.
        received.resize(first.size() + 20);
        boost::system::error_code ec;
        asio::read(socket, asio::buffer(received), ec);
        asio::write(socket, asio::buffer(std::string("abcdefghij\x88\x02\x03\xe8", 14)), ec);
        char c;
        socket.read_some(asio::buffer(&c, 1), ec);  // until the gateway closes
      });
  TestGateway gateway(BasicConfig(R"(
[[rules]]
name = "one"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1d"
per = "message"
)"),
                      upstream.port(), TestClock::kSteady);
  Client client(gateway.port());
  client.Send(Handshake("/"));
  ASSERT_EQ(client.Read().result_int(), 101);
  client.Send(first + MaskedFrame('\x81', "two"));
  EXPECT_EQ(client.ReadToClose(), std::string("\x82\x14"
                                              "0123456789abcdefghij\x88\x0e\x03\xf0rate_limited",
                                              38));
  client.socket().close();
  const std::string received = upstream.Received();
  EXPECT_EQ(received.substr(0, first.size()), first);
  EXPECT_EQ(received.substr(first.size(), 2), "\x88\x8e");  // masked, 14 bytes
}

TEST(WebSocket, ATunnelWithoutMessageRulesLooksAtNoFrame) {
  RawUpstream upstream;
  std::string config = BasicConfig(kFiveMessagesADay);
  config.replace(config.find("per = \"message\""), 15,
                 "per = \"message\"\nmatch = { path_prefix = \"/elsewhere\" }");
  TestGateway gateway(config, upstream.port(), TestClock::kSteady);
  Client client(gateway.port());
  client.Send(Handshake("/"));
  ASSERT_EQ(client.Read().result_int(), 101);
  // Unmasked, a reserved opcode, six messages: all relayed as they are.
  std::string bytes = "\x81\x05hello\x83\x01x";
  for (int i = 0; i < 6; ++i) bytes += MaskedFrame('\x82', "m" + std::to_string(i));
  client.Send(bytes);
  client.socket().shutdown(tcp::socket::shutdown_send);
  EXPECT_EQ(upstream.Received(), bytes);
}

TEST(WebSocket, CompressedMessagesPassWhenTheUpstreamAcceptedPerMessageDeflate) {
  EchoServer echo(EchoCompression::kPerMessageDeflate);
  // The limit is on the bytes sent: 1 MiB of random bytes deflates to more.
  TestGateway gateway(BasicConfig(R"(
[limits]
max_websocket_message_bytes = 2097152
[[rules]]
name = "messages"
key = "ip"
algorithm = "fixed_window"
limit = 100
window = "1d"
per = "message"
)"),
                      echo.port(), TestClock::kSteady);
  const std::string url = "ws://127.0.0.1:" + std::to_string(gateway.port()) + "/";
  std::string out;
  EXPECT_EQ(RunClient(url, "messages", out), 0) << out;
  EXPECT_NE(out.find("echoed 1048576"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(RunClient(url, "fragmented", out), 0) << out;
}

}  // namespace
}  // namespace tollgate::testing
