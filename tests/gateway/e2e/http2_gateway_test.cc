// HTTP/2 clients through the whole gateway (listeners, the HTTP/2 adapter,
// the request pipeline) to the echo upstream, with real peers: curl (TLS
// with ALPN, and prior knowledge), nghttp, h2load, and python3-h2 clients
// for gRPC-shaped calls and drain (h2_gateway_peer.py; /usr/bin/python3).
// Then HTTP/2 upstreams behind the gateway: a python3-h2 server that sends
// GOAWAY mid-traffic, nghttpd and a python3-h2 server over TLS
// (upstream_peer.py). Floods and stalled clients: flood_test.cc.
#include <gtest/gtest.h>

#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <memory>
#include <thread>
#include <vector>

#include "tests/gateway/test_support.h"
#include "tests/support/files.h"
#include "tests/support/net.h"

namespace tollgate::testing {
namespace {

const std::string kPython = "/usr/bin/python3";
const std::string kScripts = TOLLGATE_HTTP2_SCRIPTS;

// One plain listener (and a TLS one when `tls` is set), the echo upstream
// as "api" on "/", a dead upstream on "/down", the access log into `log`.
std::string Config(const TempDir& dir, const std::string& rules, bool tls = false,
                   const std::string& listener_extra = "") {
  std::string config = R"(
[server]
threads = 1
[[listeners]]
address = "127.0.0.1:0"
)" + listener_extra + R"(
[admin]
address = "127.0.0.1:0"
[log]
access = ")" + dir.path() + R"(/access.log"
[[upstreams]]
name = "api"
servers = ["127.0.0.1:{ECHO}"]
[[upstreams]]
name = "down"
servers = ["127.0.0.1:1"]
[[routes]]
path_prefix = "/"
upstream = "api"
[[routes]]
path_prefix = "/down"
upstream = "down"
)";
  if (tls) {
    auto [cert, key] = MakeCertificate(dir, "localhost");
    config += "[[listeners]]\naddress = \"127.0.0.1:0\"\n" + listener_extra + "tls = { cert = \"" +
              cert + "\", key = \"" + key + "\" }\n";
  }
  return config + rules;
}

constexpr const char* kPerIp50 = R"(
[[rules]]
name = "per-ip"
key = "ip"
algorithm = "fixed_window"
limit = 50
window = "1m"
)";

constexpr const char* kPerIp1 = R"(
[[rules]]
name = "per-ip"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1m"
)";

std::string Peer(const std::string& script, const std::string& scenario, std::uint16_t port) {
  std::string out;
  const int rc = RunCommand(kPython + " " + kScripts + "/" + script + " " + scenario + " " +
                                std::to_string(port) + " 2>&1",
                            "", out);
  EXPECT_EQ(rc, 0) << scenario << ": " << out;
  return out;
}

// Runs h2_gateway_peer.py's `scenario` (with `env` assignments before it)
// and calls `on_line` with each line it prints as it prints it; returns
// everything printed. Fails the test when the script does.
std::string PeerWhile(const std::string& scenario, std::uint16_t port, const std::string& env,
                      const std::function<void(const std::string&)>& on_line) {
  return ShellWhile(env + " " + kPython + " " + kScripts + "/h2_gateway_peer.py " + scenario +
                        " " + std::to_string(port) + " 2>&1",
                    on_line);
}

std::string Metrics(TestGateway& gateway) {
  Client admin(gateway.admin_port());
  return admin.Get("/metrics").body();
}

std::string Url(TestGateway& gateway, const std::string& path, std::size_t listener = 0) {
  return (listener == 0 ? "http://127.0.0.1:" : "https://localhost:") +
         std::to_string(gateway.port(listener)) + path;
}

TEST(Http2Gateway, CurlPriorKnowledgeAndTheAccessLog) {
  TempDir dir;
  auto echo = StartEcho();
  {
    TestGateway gateway(Config(dir, kPerIp50), echo->port());
    const std::string out =
        Shell("curl -sS -i --http2-prior-knowledge " + Url(gateway, "/api/hello"));
    EXPECT_NE(out.find("HTTP/2 200"), std::string::npos) << out;
    EXPECT_NE(out.find("hello from upstream"), std::string::npos) << out;
    EXPECT_NE(out.find("ratelimit-policy: \"per-ip\";q=50;w=60"), std::string::npos) << out;
    EXPECT_NE(out.find("x-ratelimit-remaining: 49"), std::string::npos) << out;
    // RFC 9113: HEAD keeps the length, a 204 has none, neither a body.
    const std::string head =
        Shell("curl -sS -I --http2-prior-knowledge " + Url(gateway, "/api/hello"));
    EXPECT_NE(head.find("content-length: 20"), std::string::npos) << head;
    const std::string no_content =
        Shell("curl -sS -i --http2-prior-knowledge " + Url(gateway, "/_test/status/204"));
    EXPECT_NE(no_content.find("HTTP/2 204"), std::string::npos) << no_content;
    EXPECT_EQ(no_content.find("content-length"), std::string::npos) << no_content;
    // A header list above max_header_bytes is answered by the connection
    // itself, and logged like any answer.
    EXPECT_EQ(Shell("curl -sS -o /dev/null -w '%{http_code}' --http2-prior-knowledge -H "
                    "\"X-Big: $(head -c 20000 /dev/zero | tr '\\0' a)\" " +
                    Url(gateway, "/api/hello")),
              "431");
    // HTTP/1.1 on the same listener still works.
    Client http1(gateway.port());
    EXPECT_EQ(http1.Get("/api/hello").result_int(), 200);
  }
  // The gateway is gone: its access log is complete.
  const std::string log = ReadFile(dir.path() + "/access.log");
  EXPECT_NE(log.find(" HTTP/2.0\" 431 "), std::string::npos) << log;
  EXPECT_NE(log.find("\"GET /api/hello HTTP/2.0\" 200 20"), std::string::npos) << log;
  EXPECT_NE(log.find("\"HEAD /api/hello HTTP/2.0\" 200 0"), std::string::npos) << log;
  EXPECT_NE(log.find("\"GET /api/hello HTTP/1.1\" 200"), std::string::npos) << log;
}

// What an HTTP/1.1 upstream reads of an HTTP/2 request: the client's
// fields, tollgate's X-Forwarded-* and X-Real-IP (a client's own spellings
// of them replaced), Host from :authority, no hop-by-hop field.
TEST(Http2Gateway, Http1UpstreamSeesTheForwardedFields) {
  TempDir dir;
  auto echo = StartEcho();
  TestGateway gateway(Config(dir, ""), echo->port());
  const std::string out = Shell(
      "curl -sS --http2-prior-knowledge -H 'X-Forwarded-Proto: https' "
      "-H 'X-Forwarded-For: 203.0.113.7' -H 'X-Custom: 1' " +
      Url(gateway, "/_test/headers"));
  const std::string port = std::to_string(gateway.port());
  const std::vector<std::string> expected{
      "\"X-Forwarded-For\":\"203.0.113.7, 127.0.0.1\"", "\"X-Forwarded-Proto\":\"http\"",
      "\"X-Forwarded-Host\":\"127.0.0.1:" + port + "\"", "\"X-Real-IP\":\"127.0.0.1\"",
      "\"Host\":\"127.0.0.1:" + port + "\"", "\"x-custom\":\"1\""};
  for (const std::string& field : expected) {
    EXPECT_NE(out.find(field), std::string::npos) << field << " in " << out;
  }
  EXPECT_EQ(out.find("https"), std::string::npos) << out;
}

TEST(Http2Gateway, CurlOverTlsNegotiatesH2WithAlpn) {
  TempDir dir;
  auto echo = StartEcho();
  TestGateway gateway(Config(dir, "", /*tls=*/true), echo->port());
  EXPECT_EQ(Shell("curl -sS -k --http2 -o /dev/null -w '%{http_version}' " +
                  Url(gateway, "/api/hello", 1)),
            "2");
  // Without --http2 curl offers http/1.1 only, and gets it.
  EXPECT_EQ(Shell("curl -sS -k --http1.1 -o /dev/null -w '%{http_version}' " +
                  Url(gateway, "/api/hello", 1)),
            "1.1");
}

TEST(Http2Gateway, Http2CanBeTurnedOffPerListener) {
  TempDir dir;
  auto echo = StartEcho();
  TestGateway gateway(Config(dir, "", /*tls=*/true, "http2 = false\n"), echo->port());
  EXPECT_EQ(Shell("curl -sS -k --http2 -o /dev/null -w '%{http_version}' " +
                  Url(gateway, "/api/hello", 1)),
            "1.1");
  // The preface is no request line: HTTP/1.1 answers it 400 and closes.
  std::string out;
  RunCommand("curl -sS --http2-prior-knowledge -o /dev/null -w '%{http_code}' " +
                 Url(gateway, "/api/hello") + " 2>&1",
             "", out);
  EXPECT_EQ(out.find("200"), std::string::npos) << out;
}

TEST(Http2Gateway, NghttpSeesTheUpstreamsTrailers) {
  TempDir dir;
  auto echo = StartEcho();
  TestGateway gateway(Config(dir, ""), echo->port());
  const std::string out = Shell("nghttp -nv " + Url(gateway, "/_test/trailers"));
  EXPECT_NE(out.find("grpc-status: 0"), std::string::npos) << out;
  EXPECT_NE(out.find("grpc-message: ok"), std::string::npos) << out;
  // The trailers come in a HEADERS frame of their own after the DATA.
  EXPECT_LT(out.find("recv DATA frame"), out.rfind("recv HEADERS frame")) << out;
  const std::string metrics = Metrics(gateway);
  EXPECT_NE(metrics.find("tollgate_http2_streams 0"), std::string::npos) << metrics;
}

// 100 streams in flight on one connection against a per-IP limit of 50:
// the rate rules count streams, so exactly 50 pass.
TEST(Http2Gateway, H2loadHundredStreamsAgainstALimitOfFifty) {
  TempDir dir;
  auto echo = StartEcho();
  TestGateway gateway(Config(dir, kPerIp50), echo->port());
  const std::string out =
      Shell("h2load -n 100 -c 1 -m 100 " + Url(gateway, "/api/hello"));
  EXPECT_NE(out.find("100 done, 50 succeeded, 50 failed, 0 errored"), std::string::npos) << out;
  EXPECT_NE(out.find("status codes: 50 2xx, 0 3xx, 50 4xx, 0 5xx"), std::string::npos) << out;
  const std::string metrics = Metrics(gateway);
  EXPECT_NE(metrics.find("tollgate_ratelimit_decisions_total{rule=\"per-ip\",decision=\"allowed\"} 50"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("tollgate_ratelimit_decisions_total{rule=\"per-ip\",decision=\"limited\"} 50"),
            std::string::npos)
      << metrics;
  // A limited request: 429 with the rate-limit fields and the JSON body.
  const std::string limited =
      Shell("curl -sS -i --http2-prior-knowledge " + Url(gateway, "/api/hello"));
  EXPECT_NE(limited.find("HTTP/2 429"), std::string::npos) << limited;
  EXPECT_NE(limited.find("retry-after: "), std::string::npos) << limited;
  EXPECT_NE(limited.find("ratelimit: \"per-ip\";r=0;t="), std::string::npos) << limited;
  EXPECT_NE(limited.find("x-ratelimit-remaining: 0"), std::string::npos) << limited;
  EXPECT_NE(limited.find(R"({"error":"rate_limited","rule":"per-ip","retry_after_ms":)"),
            std::string::npos)
      << limited;
}

TEST(Http2Gateway, LimitedGrpcCallIsATrailersOnlyResourceExhausted) {
  TempDir dir;
  auto echo = StartEcho();
  TestGateway gateway(Config(dir, kPerIp1), echo->port());
  const std::string out = Peer("h2_gateway_peer.py", "grpc-limited", gateway.port());
  // The first reaches the upstream, whose chunked trailers come back as
  // HTTP/2 trailers.
  EXPECT_NE(out.find("first_http=200\nfirst_grpc_status=0\nfirst_grpc_message=ok\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("second_http=200\nsecond_grpc_status=8\n"), std::string::npos) << out;
  EXPECT_NE(out.find("second_grpc_message=rate_limited: rule \"per-ip\", retry after "),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("second_trailers_only=1"), std::string::npos) << out;
  EXPECT_NE(out.find("second_retry-after="), std::string::npos) << out;
  EXPECT_NE(out.find("second_ratelimit-policy=\"per-ip\";q=1;w=60"), std::string::npos) << out;
  EXPECT_NE(out.find("second_x-ratelimit-remaining=0"), std::string::npos) << out;
  const std::string metrics = Metrics(gateway);
  EXPECT_NE(metrics.find("tollgate_grpc_responses_total{route=\"/\",grpc_status=\"0\"} 1"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("tollgate_grpc_responses_total{route=\"/\",grpc_status=\"8\"} 1"),
            std::string::npos)
      << metrics;
}

// A refusal that comes while the client is still uploading: the rest of
// the body is read and dropped, so that curl (Debian 12's 7.88) gets the
// answer every time instead of failing with "stream was not closed
// cleanly" (exit 92) when a reset follows it.
TEST(Http2Gateway, CurlUploadingGetsTheRefusal) {
  TempDir dir;
  auto echo = StartEcho();
  TestGateway gateway(Config(dir, kPerIp1), echo->port());
  const std::string body = dir.Write("body", std::string(256 * 1024, 'u'));
  const std::string url = Url(gateway, "/api/upload");
  ASSERT_EQ(Shell("curl -sS -o /dev/null -w '%{http_code}' --http2-prior-knowledge " + url),
            "200");
  const std::string post = "curl -sS -i --http2-prior-knowledge --data-binary @" + body + " ";
  const std::string grpc = post + "-H 'content-type: application/grpc' -H 'te: trailers' ";
  int failed = 0;
  for (int i = 0; i < 40; ++i) {
    for (const std::string* command : {&post, &grpc}) {
      std::string out;
      const int rc = RunCommand(*command + url + " 2>&1", "", out);
      const bool answered = command == &post
                                ? out.find("\"error\":\"rate_limited\"") != std::string::npos
                                : out.find("grpc-status: 8") != std::string::npos;
      if (rc != 0 || !answered) {
        ++failed;
        ADD_FAILURE() << "call " << i << " exited " << rc << ": " << out;
      }
      if (failed > 3) return;
    }
  }
}

// A real gRPC client (grpcio) sees a limited call as RESOURCE_EXHAUSTED
// with the rule and the wait in its details, the RateLimit fields in its
// trailing metadata; an upstream that is down as UNAVAILABLE; a deadline
// the upstream misses as DEADLINE_EXCEEDED.
TEST(Http2Gateway, GrpcioClientSeesGrpcStatuses) {
  TempDir dir;
  auto echo = StartEcho();
  TestGateway gateway(Config(dir, kPerIp1), echo->port());
  const std::string port = std::to_string(gateway.port());
  const std::string client = kPython + " " + kScripts + "/grpc_client.py " + port;
  // The first call reaches the echo upstream, which is no gRPC server.
  const std::string limited = Shell(client + " /pkg.Service/Method 2");
  EXPECT_NE(limited.find("1 code=RESOURCE_EXHAUSTED details=rate_limited: rule \"per-ip\", "
                         "retry after "),
            std::string::npos)
      << limited;
  EXPECT_NE(limited.find("1 trailer ratelimit-policy=\"per-ip\";q=1;w=60"), std::string::npos)
      << limited;
  EXPECT_NE(limited.find("1 trailer retry-after="), std::string::npos) << limited;
}

TEST(Http2Gateway, GrpcioClientSeesUnavailableAndDeadlineExceeded) {
  TempDir dir;
  auto echo = StartEcho();
  TestGateway gateway(Config(dir, ""), echo->port());
  const std::string client =
      kPython + " " + kScripts + "/grpc_client.py " + std::to_string(gateway.port());
  const std::string down = Shell(client + " /down/pkg.Service/Method 1");
  EXPECT_NE(down.find("0 code=UNAVAILABLE details=bad_gateway: the upstream is unavailable"),
            std::string::npos)
      << down;
  // grpcio sends grpc-timeout; the upstream sleeps longer.
  const std::string slow = Shell(client + " /_test/sleep/3000 1 0.3");
  EXPECT_NE(slow.find("0 code=DEADLINE_EXCEEDED"), std::string::npos) << slow;
}

TEST(Http2Gateway, UpstreamDownIsBadGatewayOrUnavailable) {
  TempDir dir;
  auto echo = StartEcho();
  TestGateway gateway(Config(dir, ""), echo->port());
  EXPECT_EQ(Shell("curl -sS --http2-prior-knowledge -o /dev/null -w '%{http_code}' " +
                  Url(gateway, "/down/x")),
            "502");
  const std::string out = Peer("h2_gateway_peer.py", "grpc-unavailable", gateway.port());
  EXPECT_NE(out.find("down_http=200\ndown_grpc_status=14\n"), std::string::npos) << out;
}

TEST(Http2Gateway, GrpcTimeoutIsHonouredAsDeadlineExceeded) {
  TempDir dir;
  auto echo = StartEcho();
  TestGateway gateway(Config(dir, ""), echo->port());
  const std::string out = Peer("h2_gateway_peer.py", "grpc-deadline", gateway.port());
  EXPECT_NE(out.find("slow_http=200\nslow_grpc_status=4\n"), std::string::npos) << out;
}

TEST(Http2Gateway, LargeBodiesStreamBothWays) {
  TempDir dir;
  auto echo = StartEcho();
  TestGateway gateway(Config(dir, ""), echo->port());
  std::string data(3'000'000, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 7 + 3) & 0xff);
  const std::string file = dir.Write("body", data);
  // Without a content-length (curl -T - streams it), chunked to the upstream.
  const std::string echoed = Shell("curl -sS --http2-prior-knowledge --data-binary @" + file +
                                   " " + Url(gateway, "/_test/echo") + " | cmp - " + file +
                                   " && echo same");
  EXPECT_EQ(echoed, "same\n");
  const std::string piped = Shell("cat " + file + " | curl -sS --http2-prior-knowledge -T - " +
                                  Url(gateway, "/_test/echo") + " | cmp - " + file +
                                  " && echo same");
  EXPECT_EQ(piped, "same\n");
  EXPECT_EQ(Shell("curl -sS --http2-prior-knowledge " + Url(gateway, "/_test/bytes/8000000?chunked") +
                  " | wc -c"),
            "8000000\n");
}

TEST(Http2Gateway, DrainAnswersStreamsInFlightThenGoaway) {
  TempDir dir;
  auto echo = StartEcho();
  TestGateway gateway(Config(dir, ""), echo->port());
  const std::string out =
      PeerWhile("drain", gateway.port(), "", [&](const std::string& line) {
        if (line == "started\n") gateway.server().Drain();
      });
  EXPECT_NE(out.find("status=200 goaway=0"), std::string::npos) << out;
}

// The gateway destroyed while a stream waits for its HTTP/1.1 upstream's
// answer: the stream's coroutine frame may go after its connection, which
// counted the upstream connections its streams hold.
TEST(Http2Gateway, DestroyedWhileAStreamWaitsForItsUpstream) {
  TempDir dir;
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor silent(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  auto gateway = std::make_unique<TestGateway>(Config(dir, ""), silent.local_endpoint().port());
  Process client({"/usr/bin/curl", "-sS", "-m", "30", "--http2-prior-knowledge",
                  Url(*gateway, "/api/hello")});
  boost::asio::ip::tcp::socket upstream(io);
  silent.accept(upstream);
  // The stream holds the upstream connection before it writes the request.
  boost::asio::streambuf head;
  boost::asio::read_until(upstream, head, "\r\n\r\n");
  gateway.reset();
}

// max_inflight takes a place per stream: two streams of one client at
// once, one place.
TEST(Http2Gateway, MaxInflightCountsStreams) {
  TempDir dir;
  auto echo = StartEcho();
  TestGateway gateway(Config(dir, R"(
[[rules]]
name = "one-at-once"
key = "ip"
max_inflight = 1
)"),
                      echo->port());
  const std::string out = Shell("h2load -n 2 -c 1 -m 2 " + Url(gateway, "/_test/sleep/300"));
  EXPECT_NE(out.find("status codes: 1 2xx, 0 3xx, 1 4xx, 0 5xx"), std::string::npos) << out;
}

// A reload takes effect between two streams of one connection.
TEST(Http2Gateway, ReloadTakesEffectForTheNextStream) {
  TempDir dir;
  auto echo = StartEcho();
  TestGateway gateway(Config(dir, kPerIp1), echo->port());
  const std::string out = PeerWhile(
      "reload-between-streams", gateway.port(), "RELOADED=" + dir.path() + "/reloaded",
      [&](const std::string& line) {
        if (line != "first=200\n") return;
        // Without the rule the second request passes; under it, 429.
        rules::LoadResult next =
            rules::LoadConfigText(WithEchoPort(Config(dir, ""), echo->port()), "test.toml");
        ASSERT_TRUE(next.config);
        std::string error;
        EXPECT_TRUE(
            gateway.server().Reload(std::make_shared<const rules::Config>(*next.config), error))
            << error;
        dir.Write("reloaded", "");
      });
  EXPECT_NE(out.find("second=200"), std::string::npos) << out;
}

// ---------------------------------------------------------------------------
// HTTP/2 upstreams behind the gateway.

// upstream_peer.py SCENARIO, then `args`.
PortPeer UpstreamPeer(const std::string& scenario, std::vector<std::string> args = {}) {
  args.insert(args.begin(), {kPython, kScripts + "/upstream_peer.py", scenario, "{STATS}"});
  return PortPeer(std::move(args));
}

// A gateway (one thread, so that its requests to an upstream share one
// connection) with the echo upstream on "/", and `upstreams` (name,
// settings) each behind the route "/" + its name.
std::string UpstreamsConfig(const std::vector<std::pair<std::string, std::string>>& upstreams) {
  std::string extra;
  for (const auto& [name, settings] : upstreams) {
    extra += "[[upstreams]]\nname = \"" + name + "\"\n" + settings + "\n";
  }
  for (const auto& [name, settings] : upstreams) {
    extra += "[[routes]]\npath_prefix = \"/" + name + "\"\nupstream = \"" + name + "\"\n";
  }
  return BasicConfig(extra);
}

// An h2c upstream that sends GOAWAY on its first connection's 4th request,
// naming the 2nd as the last it processes, while 10 requests are in flight
// on it: the streams above are sent again on a new connection, and every
// client gets its 200; HTTP/2 clients (h2load, 10 streams on a connection)
// and HTTP/1.1 ones (h2load --h1, 10 connections) alike.
TEST(Http2Gateway, UpstreamGoawayMidTrafficLosesNothing) {
  auto echo = StartEcho();
  PortPeer for_h2 = UpstreamPeer("goaway");
  PortPeer for_h1 = UpstreamPeer("goaway");
  const auto h2c = [](const PortPeer& peer) {
    return "servers = [\"127.0.0.1:" + std::to_string(peer.port()) + "\"]\nprotocol = \"h2c\"";
  };
  TestGateway gateway(UpstreamsConfig({{"h2", h2c(for_h2)}, {"h1", h2c(for_h1)}}), echo->port());
  const std::string h2 = Shell("h2load -n 40 -c 1 -m 10 " + Url(gateway, "/h2/x"));
  EXPECT_NE(h2.find("status codes: 40 2xx, 0 3xx, 0 4xx, 0 5xx"), std::string::npos) << h2;
  const std::string h1 = Shell("h2load --h1 -n 40 -c 10 " + Url(gateway, "/h1/x"));
  EXPECT_NE(h1.find("status codes: 40 2xx, 0 3xx, 0 4xx, 0 5xx"), std::string::npos) << h1;
  for (const PortPeer* peer : {&for_h2, &for_h1}) {
    // A second connection after the GOAWAY, and streams the first one
    // left unprocessed sent again on it.
    EXPECT_EQ(peer->Stat("connections"), 2);
    EXPECT_GT(peer->Stat("streams"), 40);
  }
}

// nghttpd (nghttp2-server) over TLS serving `root`, uploads echoed back;
// ready once it accepts a connection.
class Nghttpd {
 public:
  Nghttpd(const std::string& root, const std::string& cert, const std::string& key)
      : port_(UnusedPort()),
        process_({"/usr/sbin/nghttpd", "-a", "127.0.0.1", "-d", root, "--echo-upload",
                  "--trailer", "x-served-by: nghttpd", std::to_string(port_), key, cert}) {
    for (int i = 0; i < 500; ++i) {
      boost::asio::io_context io;
      boost::asio::ip::tcp::socket socket(io);
      boost::system::error_code ec;
      socket.connect({boost::asio::ip::make_address("127.0.0.1"), port_}, ec);
      if (!ec) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "nghttpd did not start";
  }
  std::uint16_t port() const { return port_; }

 private:
  std::uint16_t port_;
  Process process_;
};

// An HTTP/1.1 client to protocol = "h2" upstreams over TLS (ALPN h2, the
// chain checked against the test certificate): nghttpd, whose answers have
// a content-length and announce trailers (--trailer), and
// upstream_peer.py's echo, whose answers have no length and end with
// trailers. Both come chunked to an HTTP/1.1 client, the trailers in the
// last chunk; an HTTP/1.0 client gets the length and no promise of
// trailers. A MiB each way.
TEST(Http2Gateway, Http1ClientToH2UpstreamsOverTls) {
  TempDir dir;
  auto [cert, key] = MakeCertificate(dir, "localhost");
  std::string data(1 << 20, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 7 + 3) & 0xff);
  std::filesystem::create_directories(dir.path() + "/www/nghttpd");
  const std::string file = dir.Write("www/nghttpd/mib", data);
  Nghttpd nghttpd(dir.path() + "/www", cert, key);
  auto echo = StartEcho();
  PortPeer peer = UpstreamPeer("echo", {"--tls", cert, key});
  const auto h2 = [&](std::uint16_t port) {
    return "servers = [\"127.0.0.1:" + std::to_string(port) +
           "\"]\nprotocol = \"h2\"\ntls = { verify = true, ca_file = \"" + cert +
           "\", sni = \"localhost\" }";
  };
  TestGateway gateway(UpstreamsConfig({{"nghttpd", h2(nghttpd.port())}, {"peer", h2(peer.port())}}),
                      echo->port());
  const std::string curl = "curl -sS --http1.1 ";
  const std::string same = " | cmp - " + file + " && echo same";
  EXPECT_EQ(Shell(curl + Url(gateway, "/nghttpd/mib") + same), "same\n");
  EXPECT_EQ(Shell(curl + "--data-binary @" + file + " " + Url(gateway, "/nghttpd/mib") + same),
            "same\n");
  // Streamed up chunked (no length), echoed back chunked; curl writes the
  // trailers with the header (-D).
  const std::string headers = dir.path() + "/headers";
  EXPECT_EQ(Shell("cat " + file + " | " + curl + "-T - -D " + headers + " " +
                  Url(gateway, "/peer/up") + same),
            "same\n");
  const std::string head = ReadFile(headers);
  EXPECT_NE(head.find("Transfer-Encoding: chunked"), std::string::npos) << head;
  EXPECT_NE(head.find("x-echo-bytes: 1048576"), std::string::npos) << head;
  // On the wire: the body's chunk, then the last chunk with the trailers.
  Client client(gateway.port());
  client.Send("POST /peer/small HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n"
              "Connection: close\r\n\r\nhello");
  const std::string raw = client.ReadToClose();
  EXPECT_EQ(raw.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << raw;
  EXPECT_NE(raw.find("\r\n\r\n5\r\nhello\r\n0\r\nx-echo-bytes: 5\r\nx-trailer: done\r\n\r\n"),
            std::string::npos)
      << raw;
  dir.Write("www/nghttpd/small", "hello");
  Client http11(gateway.port());
  http11.Send("GET /nghttpd/small HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
  const std::string chunked = http11.ReadToClose();
  EXPECT_NE(chunked.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << chunked;
  EXPECT_EQ(chunked.find("content-length"), std::string::npos) << chunked;
  EXPECT_NE(chunked.find("\r\n\r\n5\r\nhello\r\n0\r\nx-served-by: nghttpd\r\n\r\n"),
            std::string::npos)
      << chunked;
  Client http10(gateway.port());
  http10.Send("GET /nghttpd/small HTTP/1.0\r\nHost: localhost\r\n\r\n");
  const std::string plain = http10.ReadToClose();
  EXPECT_NE(plain.find("content-length: 5\r\n"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("trailer"), std::string::npos) << plain;
  EXPECT_EQ(plain.substr(plain.size() - 7), "\r\nhello") << plain;
}

}  // namespace
}  // namespace tollgate::testing
