// The reverse proxy over real loopback sockets: framing, headers, limits,
// errors and deadlines.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <boost/json/parse.hpp>
#include <chrono>
#include <thread>
#include <vector>

#include "test_support.h"

namespace tollgate::testing {
namespace {

namespace asio = boost::asio;

class ProxyTest : public ::testing::Test {
 protected:
  void SetUp() override { echo_ = StartEcho(); }
  void StartGateway(const std::string& extra = "") {
    gateway_ = std::make_unique<TestGateway>(BasicConfig(extra), echo_->port());
  }
  std::uint16_t port() const { return gateway_->port(); }

  std::unique_ptr<gateway::EchoUpstream> echo_;
  std::unique_ptr<TestGateway> gateway_;
};

// An upstream that answers the first request of its first connection with
// `pieces`, one write each, pausing between them so that each arrives in a
// read of its own, and then closes the connection.
class ScriptedUpstream {
 public:
  explicit ScriptedUpstream(std::vector<std::string> pieces)
      : acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}) {
    thread_ = std::thread([this, pieces = std::move(pieces)] {
      asio::ip::tcp::socket socket(io_);
      boost::system::error_code ec;
      acceptor_.accept(socket, ec);
      asio::streambuf request;
      if (!ec) asio::read_until(socket, request, "\r\n\r\n", ec);
      for (const std::string& piece : pieces) {
        if (ec) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        asio::write(socket, asio::buffer(piece), ec);
      }
    });
  }
  ~ScriptedUpstream() {
    // A connection of our own ends the accept() of a gateway that never came.
    boost::system::error_code ec;
    asio::ip::tcp::socket poke(io_);
    poke.connect(acceptor_.local_endpoint(), ec);
    thread_.join();
  }
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }

 private:
  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  std::thread thread_;
};

TEST(UpstreamResponseHead, ArrivingInPiecesAfterAnInterimOneItIsReadWhole) {
  ScriptedUpstream upstream({"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 20",
                             "0 OK\r\nContent-Le", "ngth: 5\r\nX-Up: 1\r\n", "\r\nhel", "lo"});
  TestGateway gateway(BasicConfig(), upstream.port());
  Client client(gateway.port());
  Response res = client.Get("/");
  EXPECT_EQ(res.result_int(), 200);
  EXPECT_EQ(res["X-Up"], "1");
  EXPECT_EQ(res.count(http::field::link), 0u) << "the interim response is dropped";
  EXPECT_EQ(res.body(), "hello");
}

TEST(UpstreamResponseHead, CutShortByACloseIs502AndNotSentAgain) {
  ScriptedUpstream upstream({"HTTP/1.1 200 OK\r\nContent-Le"});
  TestGateway gateway(BasicConfig(), upstream.port());
  Client client(gateway.port());
  Response res = client.Get("/");
  EXPECT_EQ(res.result_int(), 502);
  EXPECT_EQ(boost::json::parse(res.body()).as_object().at("error").as_string(), "bad_gateway");
}

// Bad chunk framing in the bytes that came with the header: the client has
// seen nothing of the response yet and gets a 502, not a closed connection.
TEST(UpstreamResponseHead, BadFramingThatCameWithTheHeadIs502) {
  ScriptedUpstream upstream(
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"});
  TestGateway gateway(BasicConfig(), upstream.port());
  Client client(gateway.port());
  Response res = client.Get("/");
  EXPECT_EQ(res.result_int(), 502);
}

// A chunk extension that never ends fills the request buffer: the upload is
// refused (400) at once, not read forever.
TEST_F(ProxyTest, AChunkedBodysFramingWithoutALineEndIsRefused) {
  StartGateway();
  Client client(port());
  client.Send("POST /_test/count HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
              "5\r\nhello\r\n1;" +
              std::string(64 * 1024, 'x'));
  const Response res = client.Read();
  EXPECT_EQ(res.result_int(), 400);
}

TEST(UpstreamResponseHead, ClosedWithoutAByteOnAFreshConnectionIs502) {
  ScriptedUpstream upstream({});
  TestGateway gateway(BasicConfig(), upstream.port());
  Client client(gateway.port());
  EXPECT_EQ(client.Get("/").result_int(), 502);
}

TEST(UpstreamResponseHead, ABodyThatEndsWithTheCloseEndsThere) {
  // Data and end of stream arrive together; the body must end with them,
  // not at the upstream_response deadline (60 s, past the client's 5 s).
  ScriptedUpstream upstream({"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nhello"});
  TestGateway gateway(BasicConfig("[timeouts]\nupstream_response = \"60s\"\n"), upstream.port());
  Client client(gateway.port());
  client.Send("GET / HTTP/1.1\r\nHost: t\r\n\r\n");
  // Raw recv()s, each waiting at most the client's 5 s, until the last chunk.
  std::string got;
  char piece[512];
  while (got.find("\r\n0\r\n\r\n") == std::string::npos) {
    const ssize_t n = ::recv(client.socket().native_handle(), piece, sizeof piece, 0);
    if (n <= 0) break;
    got.append(piece, static_cast<std::size_t>(n));
  }
  // Relayed chunked to an HTTP/1.1 client: the last chunk ends the message.
  EXPECT_NE(got.find("hello\r\n0\r\n\r\n"), std::string::npos) << got;
}

TEST(UpstreamResponseHead, OverItsLimitIs502) {
  // 64 KiB is the most an upstream's response header may take.
  ScriptedUpstream upstream(
      {"HTTP/1.1 200 OK\r\nX-Big: ", std::string(70 * 1024, 'a'), "\r\nContent-Length: 0\r\n\r\n"});
  TestGateway gateway(BasicConfig(), upstream.port());
  Client client(gateway.port());
  EXPECT_EQ(client.Get("/").result_int(), 502);
}

TEST_F(ProxyTest, KeepAliveIsReusedOnBothSides) {
  StartGateway();
  Client client(port());
  for (int i = 1; i <= 3; ++i) {
    Response res = client.Get("/api/hello");
    EXPECT_EQ(res.result_int(), 200);
    EXPECT_EQ(res.body(), "hello from upstream\n");
    // One client connection, one pooled upstream connection: the upstream
    // sees the i-th request of the same connection.
    EXPECT_EQ(res["X-Upstream-Request"], std::to_string(i));
  }
  // A second client connection reuses the same idle upstream connection.
  Client other(port());
  EXPECT_EQ(other.Get("/")["X-Upstream-Request"], "4");
}

TEST_F(ProxyTest, HeadHasNoBodyAndKeepsTheConnectionUsable) {
  StartGateway();
  Client client(port());
  client.Send("HEAD /x HTTP/1.1\r\nHost: t\r\n\r\n");
  Response head = client.Read(/*head_request=*/true);
  EXPECT_EQ(head.result_int(), 200);
  EXPECT_EQ(head[http::field::content_length], "20");
  EXPECT_EQ(client.Get("/x").body(), "hello from upstream\n");
}

TEST_F(ProxyTest, NoContentAndNotModifiedHaveNoBody) {
  StartGateway();
  Client client(port());
  EXPECT_EQ(client.Get("/_test/status/204").result_int(), 204);
  EXPECT_EQ(client.Get("/_test/status/304").result_int(), 304);
  EXPECT_EQ(client.Get("/").result_int(), 200);
}

TEST_F(ProxyTest, ChunkedBothWays) {
  StartGateway();
  Client client(port());
  client.Send(
      "POST /_test/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
  Response res = client.Read();
  EXPECT_EQ(res.result_int(), 200);
  EXPECT_TRUE(res.chunked());
  EXPECT_EQ(res.body(), "hello world");
  Response bytes = client.Get("/_test/bytes/100000?chunked");
  EXPECT_TRUE(bytes.chunked());
  EXPECT_EQ(bytes.body().size(), 100000u);
}

TEST_F(ProxyTest, ABufferedBodyArrivingAfterItsHeaderIsForwardedWhole) {
  // The upstream writes the header, then the body in 16 KB pieces: the
  // gateway finds part of it buffered with the header and reads the rest.
  StartGateway();
  Client client(port());
  for (int i = 0; i < 3; ++i) {
    Response res = client.Get("/_test/bytes/60000");
    EXPECT_EQ(res.result_int(), 200);
    EXPECT_FALSE(res.chunked());
    EXPECT_EQ(res.body().size(), 60000u);
    EXPECT_EQ(res.body().find_first_not_of('x'), std::string::npos);
  }
}

TEST_F(ProxyTest, BufferedResponsesTheSocketCannotTakeAtOnceArriveWhole) {
  // Pipelined requests and a client that does not read for a while: once
  // its receive window and the gateway's send buffer are full, the gateway's
  // non-blocking write of a buffered response takes part of it and the rest
  // follows asynchronously.
  StartGateway();
  Client client(port());
  constexpr int kRequests = 160;  // 9.6 MB: more than both buffers hold
  std::string requests;
  for (int i = 0; i < kRequests; ++i)
    requests += "GET /_test/bytes/60000 HTTP/1.1\r\nHost: t\r\n\r\n";
  client.Send(requests);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // not reading
  for (int i = 0; i < kRequests; ++i) {
    Response res = client.Read();
    EXPECT_EQ(res.result_int(), 200);
    EXPECT_EQ(res.body().size(), 60000u);
    EXPECT_EQ(res.body().find_first_not_of('x'), std::string::npos);
  }
}

TEST_F(ProxyTest, ExpectContinueIsAnsweredBeforeTheBody) {
  StartGateway();
  Client client(port());
  client.Send(
      "POST /_test/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
  std::string interim(25, '\0');
  asio::read(client.socket(), asio::buffer(interim));
  EXPECT_EQ(interim, "HTTP/1.1 100 Continue\r\n\r\n");
  client.Send("hello");
  Response res = client.Read();
  EXPECT_EQ(res.body(), "hello");
}

TEST_F(ProxyTest, ABufferedRequestBodyIsForwardedWholeWithItsHeaderOrAfterIt) {
  // Two pipelined requests whose bodies arrive with their headers (parsed
  // from what was read: the first body must end exactly where the second
  // request starts), then one whose body arrives in two later pieces.
  StartGateway();
  Client client(port());
  client.Send(
      "POST /_test/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nfirst"
      "POST /_test/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 6\r\n\r\nsecond");
  EXPECT_EQ(client.Read().body(), "first");
  EXPECT_EQ(client.Read().body(), "second");
  client.Send("POST /_test/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nthi");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  client.Send("rd body");
  Response res = client.Read();
  EXPECT_EQ(res.result_int(), 200);
  EXPECT_EQ(res.body(), "third body");
}

TEST_F(ProxyTest, HopByHopHeadersAreRemovedAndForwardedHeadersSet) {
  StartGateway();
  Client client(port());
  Response res = client.Get(
      "/_test/headers",
      "Connection: keep-alive, X-Secret-Hop\r\nX-Secret-Hop: 1\r\nKeep-Alive: timeout=5\r\n"
      "TE: trailers\r\nUpgrade: websocket\r\nProxy-Authorization: Basic eDp5\r\n"
      "Proxy-Connection: keep-alive\r\nX-Forwarded-For: 203.0.113.7\r\nX-Kept: yes\r\n");
  ASSERT_EQ(res.result_int(), 200);
  const auto fields = boost::json::parse(res.body()).as_object();
  for (const char* gone : {"Connection", "X-Secret-Hop", "Keep-Alive", "TE", "Upgrade",
                           "Proxy-Authorization", "Proxy-Connection"}) {
    EXPECT_FALSE(fields.contains(gone)) << gone;
  }
  EXPECT_EQ(fields.at("X-Kept").as_string(), "yes");
  EXPECT_EQ(fields.at("Host").as_string(), "test");
  EXPECT_EQ(fields.at("X-Forwarded-For").as_string(), "203.0.113.7, 127.0.0.1");
  EXPECT_EQ(fields.at("X-Forwarded-Proto").as_string(), "http");
  EXPECT_EQ(fields.at("X-Forwarded-Host").as_string(), "test");
}

TEST_F(ProxyTest, ViaIsOptional) {
  StartGateway();
  Client plain(port());
  EXPECT_FALSE(boost::json::parse(plain.Get("/_test/headers").body()).as_object().contains("Via"));
  gateway_.reset();
  std::string config = BasicConfig();
  config.replace(config.find("threads = 1"), 11, "threads = 1\nvia = true");
  gateway_ = std::make_unique<TestGateway>(config, echo_->port());
  Client client(port());
  Response res = client.Get("/_test/headers");
  EXPECT_EQ(boost::json::parse(res.body()).as_object().at("Via").as_string(), "1.1 tollgate");
  EXPECT_EQ(res[http::field::via], "1.1 tollgate");
}

TEST_F(ProxyTest, MalformedRequestIs400AndCloses) {
  StartGateway();
  Client client(port());
  client.Send("THIS IS NOT HTTP\r\n\r\n");
  Response res = client.Read();
  EXPECT_EQ(res.result_int(), 400);
  EXPECT_EQ(boost::json::parse(res.body()).as_object().at("error").as_string(), "bad_request");
  EXPECT_TRUE(client.ClosedByPeer());
}

TEST_F(ProxyTest, AnHttp11RequestNeedsExactlyOneHostField) {
  StartGateway();
  for (const char* raw :
       {"GET / HTTP/1.1\r\n\r\n", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"}) {
    Client client(port());
    client.Send(raw);
    Response res = client.Read();
    EXPECT_EQ(res.result_int(), 400) << raw;
    EXPECT_EQ(boost::json::parse(res.body()).as_object().at("error").as_string(), "bad_request");
    EXPECT_TRUE(client.ClosedByPeer()) << raw;
  }
  Client http10(port());
  http10.Send("GET / HTTP/1.0\r\n\r\n");
  EXPECT_EQ(http10.Read().result_int(), 200);
}

TEST_F(ProxyTest, AHostFieldThatIsNoHostIs400) {
  StartGateway();
  for (const char* host : {"a b", "evil.example/x", "user@host", "h\\x"}) {
    Client client(port());
    client.Send(std::string("GET / HTTP/1.1\r\nHost: ") + host + "\r\n\r\n");
    EXPECT_EQ(client.Read().result_int(), 400) << host;
  }
  Client ok(port());  // IP literal and port
  ok.Send("GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n");
  EXPECT_EQ(ok.Read().result_int(), 200);
}

TEST_F(ProxyTest, AnAbsoluteFormTargetIsItsPathWithItsAuthorityAsHost) {
  StartGateway();
  Client client(port());
  client.Send("GET http://api.example:8080/_test/headers?x=1 HTTP/1.1\r\nHost: other\r\n\r\n");
  Response res = client.Read();
  ASSERT_EQ(res.result_int(), 200);
  const auto fields = boost::json::parse(res.body()).as_object();
  EXPECT_EQ(fields.at("Host").as_string(), "api.example:8080");
  EXPECT_EQ(fields.at("X-Forwarded-Host").as_string(), "api.example:8080");
  // The connection goes on with requests in either form.
  EXPECT_EQ(client.Get("/").result_int(), 200);
}

TEST_F(ProxyTest, ATargetThatIsNeitherAPathNorAnHttpUrlIs400) {
  StartGateway();
  for (const char* target : {"api", "ftp://files.example/x", "http:/no-authority", "*",
                             "http://trusted.example@evil.example/x"}) {
    Client client(port());
    client.Send(std::string("GET ") + target + " HTTP/1.1\r\nHost: t\r\n\r\n");
    EXPECT_EQ(client.Read().result_int(), 400) << target;
  }
}

TEST_F(ProxyTest, ATransferEncodingNotEndingWithChunkedIs400AndTheRestIsNotARequest) {
  StartGateway();
  Client client(port());
  // Taken as bodiless, the body would be read as a second request.
  client.Send(
      "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"
      "GET /_test/count HTTP/1.1\r\nHost: t\r\n\r\n");
  EXPECT_EQ(client.Read().result_int(), 400);
  EXPECT_TRUE(client.ClosedByPeer()) << "no answer to the second request";
}

TEST_F(ProxyTest, OversizeHeaderIs431) {
  StartGateway();
  Client client(port());
  client.Send("GET / HTTP/1.1\r\nHost: t\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n");
  EXPECT_EQ(client.Read().result_int(), 431);
}

TEST_F(ProxyTest, OversizeBodyIs413WhetherDeclaredOrChunked) {
  StartGateway("[limits]\nmax_body_bytes = 1000\n");
  Client declared(port());
  declared.Send("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1001\r\n\r\n");
  EXPECT_EQ(declared.Read().result_int(), 413);
  Client chunked(port());
  chunked.Send("POST /_test/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
  const std::string piece = std::string("200\r\n") + std::string(512, 'x') + "\r\n";
  chunked.Send(piece + piece + piece);
  const std::string answer = chunked.ReadToClose();
  EXPECT_NE(answer.find("413"), std::string::npos) << answer.substr(0, 200);
}

TEST_F(ProxyTest, UnreachableUpstreamIs502) {
  // A port that was free a moment ago: connections are refused.
  std::uint16_t dead_port;
  {
    asio::io_context io;
    asio::ip::tcp::acceptor a(io, {asio::ip::make_address("127.0.0.1"), 0});
    dead_port = a.local_endpoint().port();
  }
  gateway_ = std::make_unique<TestGateway>(BasicConfig(), dead_port);
  Client client(port());
  Response res = client.Get("/");
  EXPECT_EQ(res.result_int(), 502);
  EXPECT_EQ(boost::json::parse(res.body()).as_object().at("error").as_string(), "bad_gateway");
  EXPECT_EQ(res.body().find("127.0.0.1"), std::string::npos) << "no internals leak";
  // The connection stays usable after an error answered in full.
  EXPECT_EQ(client.Get("/").result_int(), 502);
}

TEST_F(ProxyTest, SlowUpstreamIs504) {
  StartGateway("[timeouts]\nupstream_response = \"200ms\"\n");
  Client client(port());
  Response res = client.Get("/_test/sleep/3000");
  EXPECT_EQ(res.result_int(), 504);
  EXPECT_EQ(boost::json::parse(res.body()).as_object().at("error").as_string(), "gateway_timeout");
}

TEST_F(ProxyTest, NoRouteIs404) {
  std::string config = BasicConfig();
  config.replace(config.find("path_prefix = \"/\""), 17, "path_prefix = \"/api\"");
  gateway_ = std::make_unique<TestGateway>(config, echo_->port());
  Client client(port());
  EXPECT_EQ(client.Get("/other").result_int(), 404);
  EXPECT_EQ(client.Get("/api/x").result_int(), 200);
}

TEST_F(ProxyTest, SlowlorisIsCutOffWhileOthersAreServed) {
  StartGateway("[timeouts]\nclient_header = \"300ms\"\n");
  Client slow(port());
  slow.Send("GET / HTTP/1.1\r\n");
  bool cut_off = false;
  for (int i = 0; i < 40 && !cut_off; ++i) {
    // Trickle a header byte now and then, never finishing the header.
    boost::system::error_code ec;
    asio::write(slow.socket(), asio::buffer("X", 1), ec);
    if (ec) cut_off = true;
    Client other(port());
    EXPECT_EQ(other.Get("/").result_int(), 200);
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  const std::string answer = slow.ReadToClose();
  EXPECT_NE(answer.find("408"), std::string::npos) << answer;
}

TEST_F(ProxyTest, IdleKeepAliveConnectionIsClosed) {
  StartGateway("[timeouts]\nclient_idle = \"200ms\"\n");
  Client client(port());
  EXPECT_EQ(client.Get("/").result_int(), 200);
  EXPECT_TRUE(client.ClosedByPeer());
}

TEST_F(ProxyTest, Http10ClientGetsAClosedConnection) {
  StartGateway();
  Client client(port());
  client.Send("GET /_test/bytes/10?chunked HTTP/1.0\r\n\r\n");
  const std::string answer = client.ReadToClose();
  EXPECT_NE(answer.find("200 OK"), std::string::npos);
  EXPECT_EQ(answer.find("chunked"), std::string::npos) << "no chunks for HTTP/1.0";
  EXPECT_NE(answer.find("xxxxxxxxxx"), std::string::npos);
}

TEST_F(ProxyTest, AClientThatHalfClosesAfterItsRequestGetsTheAnswerAndTheCloseAtOnce) {
  StartGateway();
  Client client(port());
  client.Send("GET / HTTP/1.1\r\nHost: t\r\n\r\n");
  client.socket().shutdown(asio::ip::tcp::socket::shutdown_send);
  EXPECT_EQ(client.Read().result_int(), 200);
  // The end of stream came with the request: the gateway closes now, not
  // after client_idle (60 s). A raw recv() waits at most the client's 5 s.
  char c;
  EXPECT_EQ(::recv(client.socket().native_handle(), &c, 1, 0), 0);
}

TEST_F(ProxyTest, StaleUpstreamConnectionIsRetriedForIdempotentRequests) {
  StartGateway();
  Client client(port());
  // The upstream answers and closes; the pooled connection is then dead.
  EXPECT_EQ(client.Get("/_test/close").result_int(), 200);
  EXPECT_EQ(client.Get("/").result_int(), 200);
}

// Rules and routes see the canonical path and Host (rules/normalize.h): the
// spellings an upstream that normalises serves as /api/x are all /api/x to
// a rule, and the upstream is sent that canonical path.
TEST_F(ProxyTest, PathAndHostTricksDoNotDodgeRules) {
  StartGateway(R"(
[[rules]]
name = "api"
match = { path_prefix = "/api" }
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1h"
[[rules]]
name = "host"
match = { host = "limited.example.com" }
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1h"
)");
  Client client(port());
  EXPECT_EQ(client.Get("/api/x").result_int(), 200);
  for (const char* trick : {"/%61pi/x", "//api/x", "/./api/x", "/x/../api/x", "/api//x",
                            "/%2e/api/x", "/API/../api/x"}) {
    EXPECT_EQ(client.Get(trick).result_int(), 429) << trick;
  }
  Client by_host(port());
  const auto host = [&](const std::string& name) {
    by_host.Send("GET / HTTP/1.1\r\nHost: " + name + "\r\n\r\n");
    return by_host.Read().result_int();
  };
  EXPECT_EQ(host("limited.example.com"), 200);
  for (const char* trick : {"limited.example.com.", "LIMITED.Example.COM", "limited.example.com.:80"}) {
    EXPECT_EQ(host(trick), 429) << trick;
  }
  // The upstream gets the canonical path (this one is its header echo) and Host.
  Client other(port());
  other.Send("GET /%5Ftest/headers HTTP/1.1\r\nHost: Some.Example.\r\n\r\n");
  Response seen = other.Read();
  EXPECT_NE(seen.body().find("\"Host\":\"some.example\""), std::string::npos) << seen.body();
}

TEST_F(ProxyTest, PathsThatCannotBeCanonicalAre400) {
  StartGateway();
  for (const char* bad : {"/../x", "/a/../../x", "/a%00b", "/a%zz", "/a%2", "/%2e%2e/x"}) {
    Client client(port());
    client.Send(std::string("GET ") + bad + " HTTP/1.1\r\nHost: t\r\n\r\n");
    Response res = client.Read();
    EXPECT_EQ(res.result_int(), 400) << bad;
    EXPECT_EQ(res[http::field::connection], "close") << bad;
  }
  // An encoded slash stays encoded and is no separator: one segment.
  Client client(port());
  EXPECT_EQ(client.Get("/a%2F..%2Fb").result_int(), 200);
}

// RFC 9110 §8.6: several Content-Length values are refused (as nginx does)
// rather than forwarded as received; a transfer coding other than chunked
// is 501 (as nginx), not relayed without it.
TEST_F(ProxyTest, RepeatedContentLengthIs400AndOtherCodingsAre501) {
  StartGateway();
  for (const char* lengths : {"Content-Length: 5, 5\r\n", "Content-Length: 5\r\nContent-Length: 5\r\n"}) {
    Client client(port());
    client.Send(std::string("POST / HTTP/1.1\r\nHost: t\r\n") + lengths + "\r\nhello");
    EXPECT_EQ(client.Read().result_int(), 400) << lengths;
  }
  for (const char* codings : {"Transfer-Encoding: gzip, chunked\r\n",
                              "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"}) {
    Client client(port());
    client.Send(std::string("POST / HTTP/1.1\r\nHost: t\r\n") + codings + "\r\n0\r\n\r\n");
    Response res = client.Read();
    EXPECT_EQ(res.result_int(), 501) << codings;
    EXPECT_EQ(res[http::field::connection], "close") << codings;
  }
}

bool ClosedNow(Client& client) {
  char byte;
  return ::recv(client.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

// At [limits] max_connections, accepting pauses and one idle keep-alive
// connection is closed to make room for the new client.
TEST_F(ProxyTest, AtMaxConnectionsAnIdleKeepAliveConnectionMakesRoom) {
  StartGateway("[limits]\nmax_connections = 3\n");
  std::vector<std::unique_ptr<Client>> idle;
  for (int i = 0; i < 3; ++i) {
    idle.push_back(std::make_unique<Client>(port()));
    EXPECT_EQ(idle.back()->Get("/").result_int(), 200);
  }
  Client late(port());
  EXPECT_EQ(late.Get("/").result_int(), 200);
  int closed = 0;
  for (auto& c : idle) closed += ClosedNow(*c);
  EXPECT_EQ(closed, 1);
}

// A keep-alive connection parks after its first exchange (its coroutine
// ends and a completion handler waits for the next request, which starts
// it again); later, the ones found idle by two sweeps in a row park. They
// are served as before, and parked again once idle.
TEST_F(ProxyTest, ParkedKeepAliveConnectionsAreServedAgain) {
  StartGateway();
  gateway::Server& server = gateway_->server();
  EXPECT_EQ(server.SweepIdle(), 0u);  // the test sweeps from now on
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(std::make_unique<Client>(port()));
    EXPECT_EQ(clients.back()->Get("/").result_int(), 200);
  }
  // Parked already, after their first exchange: two sweeps park none.
  EXPECT_EQ(server.SweepIdle(), 0u);
  EXPECT_EQ(server.SweepIdle(), 0u);
  for (int round = 0; round < 2; ++round) {
    for (auto& c : clients) EXPECT_EQ(c->Get("/").result_int(), 200) << round;
    EXPECT_EQ(server.SweepIdle(), 0u) << round;  // idle at one sweep: kept
    EXPECT_EQ(server.SweepIdle(), 3u) << round;  // at two: parked
    EXPECT_EQ(server.SweepIdle(), 0u) << round;  // parked already
  }
}

// A parked connection closes as an idle one does: to make room at
// max_connections, and at its idle timeout.
TEST_F(ProxyTest, ParkedKeepAliveConnectionsCloseAsIdleOnesDo) {
  StartGateway("[timeouts]\nclient_idle = \"1s\"\n[limits]\nmax_connections = 3\n");
  gateway::Server& server = gateway_->server();
  EXPECT_EQ(server.SweepIdle(), 0u);  // the test sweeps from now on
  std::vector<std::unique_ptr<Client>> idle;
  for (int i = 0; i < 3; ++i) {
    idle.push_back(std::make_unique<Client>(port()));
    EXPECT_EQ(idle.back()->Get("/").result_int(), 200);
  }
  for (auto& c : idle) EXPECT_EQ(c->Get("/").result_int(), 200);
  EXPECT_EQ(server.SweepIdle(), 0u);
  ASSERT_EQ(server.SweepIdle(), 3u);
  Client late(port());
  EXPECT_EQ(late.Get("/").result_int(), 200);
  int closed = 0;
  for (auto& c : idle) closed += ClosedNow(*c);
  EXPECT_EQ(closed, 1);
  for (auto& c : idle) EXPECT_TRUE(c->ClosedByPeer());  // the others at client_idle
}

// The hostile test's case: a descriptor limit of 256 and more idle
// connections than there are descriptors; the gateway (max_connections
// derived from the limit) keeps serving new clients.
TEST(MaxConnections, ManyIdleConnectionsDoNotStopNewClients) {
  auto echo = StartEcho();
  TempDir dir;
  const std::string file = dir.Write("tollgate.toml", WithEchoPort(BasicConfig(), echo->port()));
  Process gateway({"/bin/sh", "-c",
                   std::string("ulimit -n 256 && exec ") + TOLLGATE_BINARY + " --config " + file});
  const std::uint16_t port = WaitForPort(gateway);
  std::vector<std::unique_ptr<Client>> idle;
  for (int i = 0; i < 260; ++i) {  // more than the 256 descriptors
    idle.push_back(std::make_unique<Client>(port));
    idle.back()->Send("GET / HTTP/1.1\r\nHost: t\r\n\r\n");
  }
  for (int round = 0; round < 5; ++round) {
    Client fresh(port);
    EXPECT_EQ(fresh.Get("/").result_int(), 200) << round;
  }
  gateway.Signal(SIGTERM);
  EXPECT_EQ(gateway.Wait(), 0);
}

// An address another gateway listens on is a start-up error naming it, as
// nginx refuses to start, not a port silently shared through SO_REUSEPORT
// (which would split clients, and every local limit, between the two). The
// first gateway keeps every connection; the admin listener likewise.
TEST(ListenerAddress, AnAddressInUseByAnotherProcessIsRefused) {
  auto echo = StartEcho();
  TestGateway first(BasicConfig(), echo->port(), TestClock::kSteady);
  TempDir dir;
  for (const auto& [listener, admin] :
       {std::pair{first.port(), std::uint16_t{0}}, std::pair{std::uint16_t{0}, first.admin_port()},
        std::pair{std::uint16_t{0}, first.port()}}) {
    std::string config = WithEchoPort(BasicConfig(), echo->port());
    config.replace(config.find("127.0.0.1:0"), 11, "127.0.0.1:" + std::to_string(listener));
    config.replace(config.rfind("127.0.0.1:0"), 11, "127.0.0.1:" + std::to_string(admin));
    const std::string file = dir.Write("second.toml", config);
    std::string out;
    EXPECT_NE(RunCommand(std::string(TOLLGATE_BINARY) + " --config " + file + " 2>&1", "", out),
              0);
    const std::uint16_t taken = listener != 0 ? listener : admin;
    EXPECT_NE(out.find("cannot listen on 127.0.0.1:" + std::to_string(taken) +
                       ": Address already in use"),
              std::string::npos)
        << out;
  }
  for (int i = 0; i < 4; ++i) {
    Client client(first.port());
    EXPECT_EQ(client.Get("/").result_int(), 200);
  }
}

}  // namespace
}  // namespace tollgate::testing
