// HTTP/2 clients through the whole gateway (listeners, the HTTP/2 adapter,
// the request pipeline) to the echo upstream, with real peers: curl (TLS
// with ALPN, and prior knowledge), nghttp, h2load, and python3-h2 clients
// for gRPC-shaped calls, drain and floods (h2_gateway_peer.py, h2_peer.py;
// /usr/bin/python3).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <memory>

#include "tests/gateway/test_support.h"

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
  const std::string command = env + " " + kPython + " " + kScripts + "/h2_gateway_peer.py " +
                              scenario + " " + std::to_string(port) + " 2>&1";
  FILE* peer = popen(command.c_str(), "r");
  if (peer == nullptr) {
    ADD_FAILURE() << "cannot run " << command;
    return "";
  }
  std::string out;
  char line[512];
  while (fgets(line, sizeof line, peer) != nullptr) {
    out += line;
    on_line(line);
  }
  EXPECT_EQ(pclose(peer), 0) << out;
  return out;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
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
    // HTTP/1.1 on the same listener still works.
    Client http1(gateway.port());
    EXPECT_EQ(http1.Get("/api/hello").result_int(), 200);
  }
  // The gateway is gone: its access log is complete.
  const std::string log = ReadFile(dir.path() + "/access.log");
  EXPECT_NE(log.find("\"GET /api/hello HTTP/2.0\" 200 20"), std::string::npos) << log;
  EXPECT_NE(log.find("\"HEAD /api/hello HTTP/2.0\" 200 0"), std::string::npos) << log;
  EXPECT_NE(log.find("\"GET /api/hello HTTP/1.1\" 200"), std::string::npos) << log;
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

// The connection layer's flood bounds hold behind the gateway's handlers.
TEST(Http2Gateway, RapidResetEndsWithEnhanceYourCalm) {
  TempDir dir;
  auto echo = StartEcho();
  TestGateway gateway(Config(dir, ""), echo->port());
  const std::string out = Peer("h2_peer.py", "rapid-reset", gateway.port());
  EXPECT_NE(out.find("goaway=11 "), std::string::npos) << out;
  // Other clients are still served.
  EXPECT_EQ(Shell("curl -sS --http2-prior-knowledge " + Url(gateway, "/api/hello")),
            "hello from upstream\n");
}

}  // namespace
}  // namespace tollgate::testing
