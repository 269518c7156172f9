// TLS towards clients (handshake, ALPN, SNI) and towards upstreams.
#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>

#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>

#include "test_support.h"
#include "tls_config.h"

namespace tollgate::testing {
namespace {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

struct TlsResult {
  std::string subject;  // CN of the certificate the server presented
  std::string alpn;
  Response response;
};

TlsResult TlsGet(std::uint16_t port, const std::string& sni, const std::string& ca_file) {
  asio::io_context io;
  ssl::context ctx(ssl::context::tls_client);
  ctx.load_verify_file(ca_file);
  ctx.set_verify_mode(ssl::verify_peer);
  ssl::stream<tcp::socket> stream(io, ctx);
  SSL_set_tlsext_host_name(stream.native_handle(), sni.c_str());
  static const unsigned char kAlpn[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  SSL_set_alpn_protos(stream.native_handle(), kAlpn, sizeof(kAlpn));
  stream.next_layer().connect({asio::ip::make_address("127.0.0.1"), port});
  stream.handshake(ssl::stream_base::client);
  TlsResult result;
  X509* cert = SSL_get1_peer_certificate(stream.native_handle());
  char cn[256] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof(cn));
  X509_free(cert);
  result.subject = cn;
  const unsigned char* alpn = nullptr;
  unsigned alpn_len = 0;
  SSL_get0_alpn_selected(stream.native_handle(), &alpn, &alpn_len);
  result.alpn.assign(reinterpret_cast<const char*>(alpn), alpn_len);
  http::request<http::empty_body> req{http::verb::get, "/_test/headers", 11};
  req.set(http::field::host, sni);
  http::write(stream, req);
  boost::beast::flat_buffer buffer;
  http::read(stream, buffer, result.response);
  return result;
}

TEST(Tls, HandshakeAlpnAndSniCertificateSelection) {
  TempDir dir;
  auto [a_cert, a_key] = MakeCertificate(dir, "a.test");
  auto [b_cert, b_key] = MakeCertificate(dir, "b.test");
  auto echo = StartEcho();
  std::string config = BasicConfig();
  config.replace(config.find("address = \"127.0.0.1:0\""), 23,
                 "address = \"127.0.0.1:0\"\ntls = [ { cert = \"" + a_cert + "\", key = \"" +
                     a_key + "\" }, { cert = \"" + b_cert + "\", key = \"" + b_key + "\" } ]");
  TestGateway gateway(config, echo->port());

  TlsResult a = TlsGet(gateway.port(), "a.test", a_cert);
  EXPECT_EQ(a.subject, "a.test");
  EXPECT_EQ(a.alpn, "http/1.1");
  EXPECT_EQ(a.response.result_int(), 200);
  EXPECT_NE(a.response.body().find("\"X-Forwarded-Proto\":\"https\""), std::string::npos);

  TlsResult b = TlsGet(gateway.port(), "b.test", b_cert);
  EXPECT_EQ(b.subject, "b.test");
  // An unknown name gets the first (default) certificate.
  EXPECT_EQ(TlsGet(gateway.port(), "localhost", a_cert).subject, "a.test");
}

TEST(Tls, UpstreamOverVerifiedTls) {
  TempDir dir;
  auto [cert, key] = MakeCertificate(dir, "upstream.test");
  auto echo = StartEcho();
  // A TLS-terminating gateway stands in for a TLS upstream.
  std::string inner_config = BasicConfig();
  inner_config.replace(
      inner_config.find("address = \"127.0.0.1:0\""), 23,
      "address = \"127.0.0.1:0\"\ntls = { cert = \"" + cert + "\", key = \"" + key + "\" }");
  TestGateway inner(inner_config, echo->port());

  std::string outer_config = BasicConfig();
  outer_config.replace(outer_config.find("servers = [\"127.0.0.1:{ECHO}\"]"), 30,
                       "servers = [\"127.0.0.1:{ECHO}\"]\ntls = { verify = true, ca_file = \"" +
                           cert + "\", sni = \"upstream.test\" }");
  TestGateway outer(outer_config, inner.port());
  Client client(outer.port());
  Response res = client.Get("/_test/headers");
  EXPECT_EQ(res.result_int(), 200);
  // The inner gateway saw TLS from the outer one.
  EXPECT_NE(res.body().find("\"X-Forwarded-Proto\":\"https\""), std::string::npos);

  // The wrong name fails verification: 502, not a silent plaintext fallback.
  std::string wrong = outer_config;
  wrong.replace(wrong.find("sni = \"upstream.test\""), 21, "sni = \"other.test\"");
  TestGateway mismatched(wrong, inner.port());
  Client c2(mismatched.port());
  EXPECT_EQ(c2.Get("/").result_int(), 502);
}


// A refusal sent while the request body is still unread: the gateway
// closes (the body would be taken for the next request), and a socket
// closed with bytes unread resets the connection, which may destroy the
// answer before the client reads it. A naive client, as many are, writes
// its whole body before it reads anything; it must still get the 429, and
// its body must be taken (read and dropped: a lingering close), not reset.
// The body (8 MiB) is larger than loopback's socket buffers hold, so the
// client is still writing when the gateway answers. (Linux keeps what a
// socket received when a reset comes, so the 429 alone would be read even
// after a reset here; the write's outcome is what tells the two apart.)
constexpr std::size_t kLargeBody = 8 * 1024 * 1024;
const char kLimitedRoute[] = R"(
[[rules]]
name = "one"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1d"
)";

struct LargePost {
  boost::system::error_code write_ec;  // of the head and body
  int status = 0;                      // 0: no answer read
};

// Writes the head and the whole body, then reads the answer.
template <typename Stream>
LargePost PostLargeThenRead(Stream& stream) {
  const std::string head =
      "POST /upload HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/octet-stream\r\n"
      "Content-Length: " +
      std::to_string(kLargeBody) + "\r\n\r\n";
  const std::string body(kLargeBody, 'x');
  LargePost result;
  asio::write(stream, asio::buffer(head), result.write_ec);
  if (!result.write_ec) asio::write(stream, asio::buffer(body), result.write_ec);
  boost::beast::flat_buffer buffer;
  Response res;
  boost::system::error_code ec;
  http::read(stream, buffer, res, ec);
  if (ec) ADD_FAILURE() << "reading the answer: " << ec.message();
  if (!ec) result.status = res.result_int();
  return result;
}

// A client context that verifies the gateway with `cert`.
ssl::context TrustingClient(const std::string& cert) {
  ssl::context ctx(ssl::context::tls_client);
  ctx.load_verify_file(cert);
  ctx.set_verify_mode(ssl::verify_peer);
  return ctx;
}

// Connects `stream` to the gateway on `port` as "localhost", handshake done.
void ConnectTls(ssl::stream<tcp::socket>& stream, std::uint16_t port) {
  SSL_set_tlsext_host_name(stream.native_handle(), "localhost");
  stream.next_layer().connect({asio::ip::make_address("127.0.0.1"), port});
  stream.handshake(ssl::stream_base::client);
}

TEST(Tls, RefusalWithTheBodyUnreadReachesTheClient) {
  TempDir dir;
  auto [cert, key] = MakeCertificate(dir, "localhost");
  auto echo = StartEcho();
  TestGateway gateway(TlsConfig(TlsTable(cert, key), kLimitedRoute), echo->port());
  asio::io_context io;
  ssl::context ctx = TrustingClient(cert);
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    ssl::stream<tcp::socket> stream(io, ctx);
    ConnectTls(stream, gateway.port());
    if (i == 0) {  // takes the one request the rule allows
      http::request<http::empty_body> req{http::verb::get, "/", 11};
      req.set(http::field::host, "localhost");
      http::write(stream, req);
      boost::beast::flat_buffer buffer;
      Response res;
      http::read(stream, buffer, res);
      EXPECT_EQ(res.result_int(), 200);
      continue;
    }
    const LargePost post = PostLargeThenRead(stream);
    EXPECT_FALSE(post.write_ec) << post.write_ec.message();
    EXPECT_EQ(post.status, 429);
  }
}

// Requests that arrive together are all answered, however TLS packs them:
// several in one record, and records sent back to back, which OpenSSL
// reads together and holds decrypted while the socket has nothing more to
// report (an idle connection waits for the socket only once nothing is
// held).
TEST(Tls, PipelinedRequestsAreAllAnswered) {
  TempDir dir;
  auto [cert, key] = MakeCertificate(dir, "localhost");
  auto echo = StartEcho();
  TestGateway gateway(TlsConfig(TlsTable(cert, key)), echo->port());
  asio::io_context io;
  ssl::context ctx = TrustingClient(cert);
  ssl::stream<tcp::socket> stream(io, ctx);
  ConnectTls(stream, gateway.port());
  const std::string request = "GET /_test/headers HTTP/1.1\r\nHost: localhost\r\n\r\n";
  asio::write(stream, asio::buffer(request + request + request));  // one record
  // Three records, written before any answer is read.
  for (int i = 0; i < 3; ++i) asio::write(stream, asio::buffer(request));
  boost::beast::flat_buffer buffer;
  for (int i = 0; i < 6; ++i) {
    SCOPED_TRACE(i);
    Response res;
    http::read(stream, buffer, res);
    EXPECT_EQ(res.result_int(), 200);
  }
  // And the connection is still served once idle.
  asio::write(stream, asio::buffer(request));
  Response res;
  http::read(stream, buffer, res);
  EXPECT_EQ(res.result_int(), 200);
}

// A client too slow with its request head is answered 408 over TLS, and
// the connection ends with close_notify: the read that timed out (the
// socket's receiving side shut) leaves the TLS session able to write.
TEST(Tls, SlowRequestHeadIsAnswered408) {
  TempDir dir;
  auto [cert, key] = MakeCertificate(dir, "localhost");
  auto echo = StartEcho();
  TestGateway gateway(TlsConfig(TlsTable(cert, key), "[timeouts]\nclient_header = \"300ms\"\n"),
                      echo->port());
  asio::io_context io;
  ssl::context ctx = TrustingClient(cert);
  ssl::stream<tcp::socket> stream(io, ctx);
  ConnectTls(stream, gateway.port());
  const timeval guard{30, 0};  // a hang guard for the blocking reads below
  setsockopt(stream.next_layer().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &guard, sizeof guard);
  asio::write(stream, asio::buffer(std::string("GET / HTTP/1.1\r\nHost: localhost\r\n")));
  boost::beast::flat_buffer buffer;
  Response res;
  boost::system::error_code ec;
  http::read(stream, buffer, res, ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(res.result_int(), 408);
  char byte;
  stream.read_some(asio::buffer(&byte, 1), ec);
  EXPECT_EQ(ec, asio::error::eof) << "a close_notify, not an alert or a reset: " << ec.message();
}

TEST(Tls, RefusalWithTheBodyUnreadReachesAPlainClient) {
  auto echo = StartEcho();
  TestGateway gateway(BasicConfig(kLimitedRoute), echo->port());
  EXPECT_EQ(Client(gateway.port()).Get("/").result_int(), 200);
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    Client client(gateway.port());
    const LargePost post = PostLargeThenRead(client.socket());
    EXPECT_FALSE(post.write_ec) << post.write_ec.message();
    EXPECT_EQ(post.status, 429);
  }
}

TEST(Tls, OversizeBodyRefusalReachesAPlainClient) {
  auto echo = StartEcho();
  TestGateway gateway(BasicConfig("[limits]\nmax_body_bytes = 1000\n"), echo->port());
  Client client(gateway.port());
  const LargePost post = PostLargeThenRead(client.socket());
  EXPECT_FALSE(post.write_ec) << post.write_ec.message();
  EXPECT_EQ(post.status, 413);
}

}  // namespace
}  // namespace tollgate::testing
