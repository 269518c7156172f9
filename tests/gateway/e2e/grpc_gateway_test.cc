// gRPC through the gateway to a real gRPC server (docs/http2-grpc.md): grpcio's client
// (grpc_client.py) -> tollgate -> grpcio's server (grpc_upstream.py) over an
// upstream with protocol = "h2c" (or "h2"), for the four kinds of call,
// failures the upstream chooses, deadlines, and the answers tollgate gives
// itself (limits, an upstream that is down, a store that is down). Also
// HTTP/1.1 clients in front of an HTTP/2 upstream (upstream_peer.py). Every
// peer runs on /usr/bin/python3 (Debian's python3-grpcio and python3-h2);
// the gRPC ones use the stubs that the build generates from echo.proto with
// protoc and grpc_python_plugin (TOLLGATE_GRPC_STUBS, given as --stubs).
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/gateway/test_support.h"
#include "tests/support/files.h"
#include "tests/support/net.h"

namespace tollgate::testing {
namespace {

const std::string kPython = "/usr/bin/python3";
const std::string kScripts = TOLLGATE_HTTP2_SCRIPTS;
const std::string kStubs = TOLLGATE_GRPC_STUBS;
constexpr const char* kH2c = "protocol = \"h2c\"";

// grpc_client.py against `port`, with the generated stubs: the mode, its
// arguments and options follow.
std::string GrpcClient(std::uint16_t port) {
  return kPython + " " + kScripts + "/grpc_client.py --stubs " + kStubs + " " +
         std::to_string(port) + " ";
}

::testing::AssertionResult Contains(const std::string& out, const std::string& text) {
  if (out.find(text) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "no \"" << text << "\" in:\n" << out;
}

// A peer that prints "port=N" first on stderr and writes its counters as a
// JSON object into a file: grpc_upstream.py (--stats FILE) or
// upstream_peer.py (SCENARIO FILE).
class PeerProcess {
 public:
  PeerProcess(const std::string& script, std::vector<std::string> args)
      : stats_(dir_.path() + "/stats.json"), process_(Argv(script, std::move(args))) {
    const std::string line = process_.StderrLine();
    EXPECT_EQ(line.rfind("port=", 0), 0u) << line;
    port_ = static_cast<std::uint16_t>(std::atoi(line.c_str() + 5));
  }
  std::uint16_t port() const { return port_; }
  // The counter `key`, 0 while the peer has not counted it.
  std::int64_t Stat(const std::string& key) const {
    const boost::json::object stats = boost::json::parse(ReadFile(stats_)).as_object();
    const auto* value = stats.if_contains(key);
    return value == nullptr ? 0 : value->as_int64();
  }
  // Waits (up to 10 s) for the counter `key` to reach `n`: a cancellation
  // reaches the peer after the client has had its answer.
  bool WaitForStat(const std::string& key, std::int64_t n) const {
    for (int i = 0; i < 500; ++i) {
      if (Stat(key) >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

 private:
  std::vector<std::string> Argv(const std::string& script, std::vector<std::string> args) {
    if (script == "grpc_upstream.py")
      args.insert(args.end(), {"--stats", stats_, "--stubs", kStubs});
    if (script == "upstream_peer.py") args.push_back(stats_);
    args.insert(args.begin(), {kPython, kScripts + "/" + script});
    return args;
  }

  TempDir dir_;
  std::string stats_;
  Process process_;
  std::uint16_t port_ = 0;
};

constexpr const char* kPerIp1 = R"(
[[rules]]
name = "per-ip"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1m"
)";

// A gateway in front of grpc_upstream.py (or of another peer).
class Grpc : public ::testing::Test {
 protected:
  // Starts grpc_upstream.py with `args` (its port, 0 for any, then options)
  // unless an upstream runs already, then the gateway: one plain listener;
  // that upstream as "grpc" (with `upstream_options`) behind the route
  // "echo" on "/", an h2c upstream that is down behind the route "down" on
  // "/tollgate.test.Down"; the access log in dir_; then `extra`.
  void Start(const std::string& extra = "", const std::string& upstream_options = kH2c,
             std::vector<std::string> args = {"0"}) {
    if (!upstream_) upstream_ = std::make_unique<PeerProcess>("grpc_upstream.py", std::move(args));
    gateway_ = std::make_unique<TestGateway>(R"(
[server]
threads = 1
[[listeners]]
address = "127.0.0.1:0"
[admin]
address = "127.0.0.1:0"
[log]
access = ")" + dir_.path() + R"(/access.log"
[[upstreams]]
name = "grpc"
servers = ["127.0.0.1:{ECHO}"]
)" + upstream_options + R"(
[[upstreams]]
name = "down"
servers = ["127.0.0.1:1"]
protocol = "h2c"
[[routes]]
name = "echo"
path_prefix = "/"
upstream = "grpc"
[[routes]]
name = "down"
path_prefix = "/tollgate.test.Down"
upstream = "down"
)" + extra,
                                             upstream_->port());
  }

  // grpc_client.py against the gateway: `args` is the mode, its arguments
  // and options.
  std::string Call(const std::string& args) { return Shell(GrpcClient(gateway_->port()) + args); }

  // Whether the gateway's metrics count `n` calls of `route` that ended
  // with gRPC status `status`.
  ::testing::AssertionResult Counted(const std::string& route, int status, int n) {
    Client admin(gateway_->admin_port());
    return Contains(admin.Get("/metrics").body(),
                    "tollgate_grpc_responses_total{route=\"" + route + "\",grpc_status=\"" +
                        std::to_string(status) + "\"} " + std::to_string(n) + "\n");
  }

  TempDir dir_;
  std::unique_ptr<PeerProcess> upstream_;
  std::unique_ptr<TestGateway> gateway_;
};

// The message, the upstream's initial metadata (with the client's own
// x-test-* metadata, which went to the upstream) and its trailing metadata
// all come through.
TEST_F(Grpc, UnaryCall) {
  Start();
  const std::string out = Call("unary hello-unary --metadata x-test-hello=world");
  EXPECT_TRUE(Contains(out, "0 reply=hello-unary\n"));
  EXPECT_TRUE(Contains(out, "0 initial x-upstream=grpc_upstream\n"));
  EXPECT_TRUE(Contains(out, "0 initial x-test-hello=world\n"));
  EXPECT_TRUE(Contains(out, "0 trailer x-trailer=unary\n0 code=OK\n"));
  EXPECT_EQ(upstream_->Stat("Unary"), 1);
  EXPECT_TRUE(Counted("echo", 0, 1));
}

TEST_F(Grpc, ServerStreamingCall) {
  Start();
  EXPECT_TRUE(Contains(Call("server-stream 5"),
                       "0 reply=reply 0\n0 reply=reply 1\n0 reply=reply 2\n0 reply=reply 3\n"
                       "0 reply=reply 4\n0 trailer x-trailer=server-stream\n0 code=OK\n"));
}

TEST_F(Grpc, ClientStreamingCall) {
  Start();
  EXPECT_TRUE(Contains(Call("client-stream one two three"),
                       "0 reply=3:one,two,three\n0 trailer x-trailer=client-stream\n0 code=OK\n"));
}

// Ping-pong: the client sends each message only once the reply to the one
// before has arrived, so the call completes only if the gateway relays the
// request body as it comes, while the response streams back. A relay that
// waited for the end of the request would hold the first message, and the
// call would end at its deadline.
TEST_F(Grpc, BidiStreamingIsRelayedBothWaysAtOnce) {
  Start();
  EXPECT_TRUE(Contains(Call("bidi 5"),
                       "0 reply=echo:ping 0\n0 reply=echo:ping 1\n0 reply=echo:ping 2\n"
                       "0 reply=echo:ping 3\n0 reply=echo:ping 4\n0 trailer x-trailer=bidi\n"
                       "0 code=OK\n"));
}

// The upstream's own failure: its status, its details (percent-encoded on
// the wire, non-ASCII included) and its trailing metadata (a binary one
// too) reach the client unchanged.
TEST_F(Grpc, UpstreamFailureIsRelayed) {
  Start();
  const std::string out = Call("fail NOT_FOUND");
  EXPECT_TRUE(Contains(out, "0 trailer x-fail-reason=chosen\n"));
  EXPECT_TRUE(Contains(out, "0 trailer x-fail-detail-bin=hex:0001feff\n"));
  EXPECT_TRUE(
      Contains(out, "0 code=NOT_FOUND details=failed on purpose: 100% sure, \xc3\xbcn\xc3\xaf"
                    "code\n"));
  EXPECT_TRUE(Contains(Call("fail PERMISSION_DENIED"),
                       "0 code=PERMISSION_DENIED details=failed on purpose"));
  EXPECT_TRUE(Counted("echo", 5, 1));
  EXPECT_TRUE(Counted("echo", 7, 1));
}

// The client's deadline (grpc-timeout) passes while the upstream holds the
// call: DEADLINE_EXCEEDED, and the upstream sees its call cancelled (the
// gateway resets its stream rather than leaving it open).
TEST_F(Grpc, ClientDeadlineIsDeadlineExceededAndCancelsTheUpstreamCall) {
  Start();
  EXPECT_TRUE(Contains(Call("slow --timeout 0.3"), "0 code=DEADLINE_EXCEEDED"));
  EXPECT_EQ(upstream_->Stat("Slow"), 1);
  EXPECT_TRUE(upstream_->WaitForStat("Slow.cancelled", 1));
}

// The gateway's own deadline (timeouts.upstream_response) passes first:
// tollgate answers DEADLINE_EXCEEDED itself, and cancels the upstream call.
TEST_F(Grpc, GatewayDeadlineIsDeadlineExceeded) {
  Start("[timeouts]\nupstream_response = \"300ms\"\n");
  EXPECT_TRUE(Contains(
      Call("slow --timeout 30"),
      "0 code=DEADLINE_EXCEEDED details=gateway_timeout: the upstream did not answer in time\n"));
  EXPECT_TRUE(upstream_->WaitForStat("Slow.cancelled", 1));
}

// Many calls of every kind at once share the upstream connection.
TEST_F(Grpc, ConcurrentCallsOfEveryKind) {
  Start();
  const std::string client = GrpcClient(gateway_->port());
  const std::string out =
      Shell("for i in 1 2 3 4; do " + client + "unary --calls 5 & " + client +
            "server-stream 20 --calls 5 & " + client + "client-stream a b c --calls 5 & " +
            client + "bidi 10 --calls 5 & done; wait");
  std::size_t ok = 0;
  for (std::size_t at = 0; (at = out.find("code=OK\n", at)) != std::string::npos; ++at) ++ok;
  EXPECT_EQ(ok, 80u) << out;
  EXPECT_FALSE(Contains(out, "details="));
}

// protocol = "h2": HTTP/2 over TLS (ALPN h2) to the gRPC server, whose
// certificate is checked against the CA file.
TEST_F(Grpc, UnaryAndBidiOverTls) {
  const auto [cert, key] = MakeCertificate(dir_, "localhost");
  Start("",
        "protocol = \"h2\"\ntls = { ca_file = \"" + cert + "\", sni = \"localhost\" }",
        {"0", "--tls", cert, key});
  EXPECT_TRUE(Contains(Call("unary over-tls"),
                       "0 reply=over-tls\n0 initial x-upstream=grpc_upstream\n"
                       "0 trailer x-trailer=unary\n0 code=OK\n"));
  EXPECT_TRUE(
      Contains(Call("bidi 3"), "0 reply=echo:ping 2\n0 trailer x-trailer=bidi\n0 code=OK\n"));
}

// Answers of tollgate's own, which do not depend on the upstream's protocol.

TEST_F(Grpc, UpstreamDownIsUnavailable) {
  Start();
  EXPECT_TRUE(Contains(Call("unary --service tollgate.test.Down"),
                       "0 code=UNAVAILABLE details=bad_gateway: the upstream is unavailable\n"));
  EXPECT_TRUE(Counted("down", 14, 1));
}

// A limited call never reaches the upstream: RESOURCE_EXHAUSTED with the
// rule and the wait in its details, the RateLimit fields in its trailing
// metadata. (That the first call passes is UnaryCall's business.)
TEST_F(Grpc, LimitedCallIsResourceExhausted) {
  Start(kPerIp1);
  const std::string out = Call("unary --calls 3");
  for (const std::string call : {"1 ", "2 "}) {
    EXPECT_TRUE(Contains(
        out, call + "code=RESOURCE_EXHAUSTED details=rate_limited: rule \"per-ip\", retry after "));
    EXPECT_TRUE(Contains(out, call + "trailer ratelimit-policy=\"per-ip\";q=1;w=60\n"));
    EXPECT_TRUE(Contains(out, call + "trailer retry-after="));
  }
  EXPECT_LE(upstream_->Stat("Unary"), 1);
  EXPECT_TRUE(Counted("echo", 8, 2));
}

// A streaming call whose request passes max_body_bytes after the response
// has begun ends RESOURCE_EXHAUSTED (the status of a call refused for its
// size before it began), not CANCELLED.
TEST_F(Grpc, StreamCutAtMaxBodyBytesIsResourceExhausted) {
  Start("[limits]\nmax_body_bytes = 100\n");
  const std::string out = Call("bidi 20");
  EXPECT_TRUE(Contains(out, "0 reply=echo:ping 0\n"));
  EXPECT_TRUE(Contains(
      out, "0 code=RESOURCE_EXHAUSTED details=body_too_large: request body exceeds the limit\n"));
  EXPECT_TRUE(Counted("echo", 8, 1));
}

// on_error = "deny" with Redis down: the call is refused before it goes
// anywhere, UNAVAILABLE as the store's 503 would be.
TEST_F(Grpc, StoreDownWithOnErrorDenyIsUnavailable) {
  const std::string redis = "url = \"redis://127.0.0.1:" + std::to_string(UnusedPort()) + "/0\"";
  Start(std::string(kPerIp1) + RedisStoreSection(redis, "deny", "50ms"));
  const std::string out = Call("unary --calls 2");
  for (const std::string call : {"0 ", "1 "}) {
    EXPECT_TRUE(Contains(out, call + "code=UNAVAILABLE details=store_unavailable: the rate-limit "
                                     "store is unavailable\n"));
  }
  EXPECT_EQ(upstream_->Stat("Unary"), 0);
  EXPECT_TRUE(Counted("echo", 14, 2));
}

// HTTP/1.1 clients in front of an HTTP/2 upstream (upstream_peer.py, a
// python3-h2 server that answers "hello PATH"): each request becomes a
// stream, bodies with a length and chunked ones alike, and the requests of
// the gateway's one thread share one connection.
TEST_F(Grpc, Http1ClientsToAnH2cUpstream) {
  upstream_ = std::make_unique<PeerProcess>("upstream_peer.py", std::vector<std::string>{"plain"});
  Start();
  Client client(gateway_->port());
  const Response get = client.Get("/hello");
  EXPECT_EQ(get.result_int(), 200);
  EXPECT_EQ(get.body(), "hello /hello");
  client.Send("POST /sized HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\n\r\nhello");
  const Response sized = client.Read();
  EXPECT_EQ(sized.result_int(), 200);
  EXPECT_EQ(sized.body(), "hello /sized");
  client.Send(
      "POST /chunked HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
  const Response chunked = client.Read();
  EXPECT_EQ(chunked.result_int(), 200);
  EXPECT_EQ(chunked.body(), "hello /chunked");
  EXPECT_EQ(Shell("curl -sS --http1.1 http://127.0.0.1:" + std::to_string(gateway_->port()) +
                  "/curl"),
            "hello /curl");
  EXPECT_EQ(upstream_->Stat("streams"), 4);
  EXPECT_EQ(upstream_->Stat("connections"), 1);
}

}  // namespace
}  // namespace tollgate::testing
