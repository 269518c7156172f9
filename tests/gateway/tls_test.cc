// TLS towards clients (handshake, ALPN, SNI) and towards upstreams.
#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio/ssl.hpp>
#include <boost/beast/http.hpp>

#include "test_support.h"

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

}  // namespace
}  // namespace tollgate::testing
