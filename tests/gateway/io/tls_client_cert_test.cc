// Client certificates at a TLS listener (gateway/io/tls.cc) as identity
// (rules/identity.cc, gateway/core/identify.cc): required and optional,
// certificates from the CA, expired, from another CA and revoked, per-user
// limits on certificate identities, the identity fields passed upstream,
// precedence over trusted identity headers, HTTP/2, and revocation that
// takes effect on SIGHUP. Clients: curl --cert and Python's ssl module.
#include <gtest/gtest.h>
#include <signal.h>

#include <boost/algorithm/string/predicate.hpp>
#include <boost/json/parse.hpp>
#include <string>

#include "test_pki.h"

namespace tollgate::testing {
namespace {

struct CurlResult {
  int exit = 0;
  std::string status;  // "200"; "000" when the handshake failed
  std::string body;
};

// GET https://127.0.0.1:port`path` with curl, presenting `cert` (none when
// its files are empty); `args`: more curl options.
CurlResult Curl(const TestPki& pki, std::uint16_t port, const ClientCert& cert,
                const std::string& args = "", const std::string& path = "/_test/headers") {
  std::string command =
      "curl -s --max-time 5 -w '\\n%{http_code}' --cacert " + pki.server_cert() + " " + args;
  if (!cert.cert.empty()) command += " --cert " + cert.cert + " --key " + cert.key;
  command += " https://127.0.0.1:" + std::to_string(port) + path;
  std::string out;
  CurlResult r;
  r.exit = RunCommand(command, "", out);
  const std::size_t last = out.rfind('\n');
  r.status = last == std::string::npos ? out : out.substr(last + 1);
  r.body = last == std::string::npos ? "" : out.substr(0, last);
  return r;
}

// The upstream's view of one request's fields (the echo's JSON object):
// the value of `name`, in any case, "" when absent. (curl speaks HTTP/2
// when ALPN offers it, and its fields come in lower case.)
std::string Field(const std::string& body, const std::string& name) {
  const boost::json::value fields = boost::json::parse(body);
  for (const auto& [key, value] : fields.as_object()) {
    if (boost::iequals(std::string_view(key), name)) return std::string(value.as_string().c_str());
  }
  return "";
}

// How many fields the upstream got whose name, in any case and with '_'
// for '-', is `name`.
int CountSpellings(const std::string& body, std::string name) {
  const auto fold = [](std::string s) {
    for (char& c : s) c = c == '_' ? '-' : static_cast<char>(std::tolower(c));
    return s;
  };
  name = fold(name);
  int n = 0;
  // Named: a range-for over parse(body).as_object() would walk an object
  // the temporary took with it.
  const boost::json::value fields = boost::json::parse(body);
  for (const auto& [key, value] : fields.as_object()) {
    if (fold(std::string(key)) == name) ++n;
  }
  return n;
}

// The SHA-256 fingerprint of a PEM certificate, as tollgate passes it.
std::string Fingerprint(const std::string& cert) {
  std::string out = Shell("openssl x509 -noout -fingerprint -sha256 -in " + cert);
  std::string hex;
  for (std::size_t i = out.find('=') + 1; i < out.size(); ++i) {
    if (std::isxdigit(static_cast<unsigned char>(out[i]))) {
      hex += static_cast<char>(std::tolower(out[i]));
    }
  }
  return hex;
}

constexpr const char* kIdentity = R"(
[identity.client_cert]
user = "subject_cn"
role = "subject_ou"
)";

class ClientCertTest : public ::testing::Test {
 protected:
  void SetUp() override {
    echo_ = StartEcho();
    pki_ = std::make_unique<TestPki>(dir_);
    alice_ = pki_->Issue("alice", "/O=Test/OU=admins/CN=alice", "URI:spiffe://test/alice");
    bob_ = pki_->Issue("bob", "/O=Test/OU=users/CN=bob");
    expired_ = pki_->Issue("carol", "/O=Test/OU=users/CN=carol", "", true);
    stranger_ = pki_->IssueByStranger("mallory", "/O=Test/OU=admins/CN=mallory");
    dave_ = pki_->Issue("dave", "/O=Test/OU=users/CN=dave");
  }
  void Start(const std::string& tls_extra, const std::string& more = "") {
    gateway_ =
        std::make_unique<TestGateway>(TlsConfig(TlsTable(*pki_, tls_extra), more), echo_->port());
  }
  CurlResult Get(const ClientCert& cert, const std::string& args = "") {
    return Curl(*pki_, gateway_->port(), cert, args);
  }

  TempDir dir_;
  std::unique_ptr<gateway::EchoUpstream> echo_;
  std::unique_ptr<TestPki> pki_;
  std::unique_ptr<TestGateway> gateway_;
  ClientCert alice_, bob_, expired_, stranger_, dave_;
  const ClientCert none_;
};

TEST_F(ClientCertTest, RequiredRefusesEveryHandshakeWithoutAValidCertificate) {
  pki_->Revoke(dave_);
  pki_->WriteCrl();
  Start("client_ca = \"" + pki_->ca_file() + "\", client_cert = \"require\", client_crl = \"" +
            pki_->crl_file() + "\"",
        kIdentity);
  EXPECT_EQ(Get(alice_).status, "200");
  EXPECT_EQ(Get(bob_).status, "200");
  for (const ClientCert* refused :
       std::initializer_list<const ClientCert*>{&none_, &expired_, &stranger_, &dave_}) {
    const CurlResult r = Get(*refused);
    EXPECT_NE(r.exit, 0) << refused->cert;
    EXPECT_EQ(r.status, "000") << refused->cert;
  }
  // Each refusal is counted by its reason.
  const std::string metrics = Client(gateway_->admin_port()).Get("/metrics").body();
  for (const char* reason :
       {"no_certificate", "certificate_expired", "unknown_ca", "certificate_revoked"}) {
    EXPECT_NE(metrics.find("tollgate_tls_handshake_failures_total{listener=\"127.0.0.1:0\","
                           "reason=\"" +
                           std::string(reason) + "\"} 1\n"),
              std::string::npos)
        << reason << "\n"
        << metrics;
  }
}

TEST_F(ClientCertTest, OptionalServesClientsWithoutAValidCertificateAnonymously) {
  Start("client_ca = \"" + pki_->ca_file() + "\", client_cert = \"optional\"",
        std::string(kIdentity) +
            "[[rules]]\nname = \"users\"\nkey = \"user\"\nalgorithm = \"fixed_window\"\n"
            "limit = 1\nwindow = \"1m\"\n");
  // Anonymous requests are not limited by a per-user rule; alice is, once
  // a minute.
  for (const ClientCert* anonymous :
       std::initializer_list<const ClientCert*>{&none_, &expired_, &stranger_, &none_}) {
    const CurlResult r = Get(*anonymous);
    EXPECT_EQ(r.status, "200") << anonymous->cert;
    EXPECT_EQ(Field(r.body, "X-Client-Cert-Subject"), "") << anonymous->cert;
  }
  EXPECT_EQ(Get(alice_).status, "200");
  EXPECT_EQ(Get(alice_).status, "429");
  EXPECT_EQ(Get(bob_).status, "200");
}

TEST_F(ClientCertTest, TheUpstreamGetsTheVerifiedCertificateAndNoClientCopies) {
  Start("client_ca = \"" + pki_->ca_file() + "\", client_cert = \"optional\"", kIdentity);
  const std::string forged =
      "-H 'X-Client-Cert-Subject: CN=root' -H 'x_client_cert_sha256: 00' "
      "-H 'X-CLIENT-CERT-SUBJECT: CN=admin'";
  const CurlResult alice = Get(alice_, forged);
  ASSERT_EQ(alice.status, "200");
  EXPECT_EQ(Field(alice.body, "X-Client-Cert-Subject"), "CN=alice,OU=admins,O=Test");
  EXPECT_EQ(Field(alice.body, "X-Client-Cert-Sha256"), Fingerprint(alice_.cert));
  EXPECT_EQ(CountSpellings(alice.body, "X-Client-Cert-Subject"), 1);
  EXPECT_EQ(CountSpellings(alice.body, "X-Client-Cert-Sha256"), 1);
  // Without a certificate nothing of them passes.
  const CurlResult anonymous = Get(none_, forged);
  ASSERT_EQ(anonymous.status, "200");
  EXPECT_EQ(CountSpellings(anonymous.body, "X-Client-Cert-Subject"), 0);
  EXPECT_EQ(CountSpellings(anonymous.body, "X-Client-Cert-Sha256"), 0);
}

TEST_F(ClientCertTest, HeaderNamesAreConfigurableAndEmptyPassesNothing) {
  Start("client_ca = \"" + pki_->ca_file() + "\", client_cert = \"require\"",
        "[identity.client_cert]\nuser = \"san_uri\"\nsubject_header = \"X-Ssl-Subject\"\n"
        "sha256_header = \"\"\n");
  const CurlResult r = Get(alice_, "-H 'X-Ssl-Subject: forged' -H 'X-Client-Cert-Sha256: kept'");
  ASSERT_EQ(r.status, "200");
  EXPECT_EQ(Field(r.body, "X-Ssl-Subject"), "CN=alice,OU=admins,O=Test");
  EXPECT_EQ(CountSpellings(r.body, "X-Ssl-Subject"), 1);
  // Not a certificate field any more: an ordinary header.
  EXPECT_EQ(Field(r.body, "X-Client-Cert-Sha256"), "kept") << r.body;
}

TEST_F(ClientCertTest, PerUserAndPerRoleLimitsApplyToCertificateIdentities) {
  Start("client_ca = \"" + pki_->ca_file() + "\", client_cert = \"require\"",
        std::string(kIdentity) +
            "[[rules]]\nname = \"admins\"\nmatch = { role = \"admins\" }\nexempt = true\n"
            "[[rules]]\nname = \"per-user\"\nkey = \"user\"\nalgorithm = \"fixed_window\"\n"
            "limit = 2\nwindow = \"1m\"\n");
  // alice (OU=admins) is exempt; bob has two a minute.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(Get(alice_).status, "200");
  EXPECT_EQ(Get(bob_).status, "200");
  EXPECT_EQ(Get(bob_).status, "200");
  EXPECT_EQ(Get(bob_).status, "429");
}

TEST_F(ClientCertTest, TheCertificateWinsOverTrustedIdentityHeaders) {
  Start("client_ca = \"" + pki_->ca_file() + "\", client_cert = \"optional\"",
        "[identity]\ntrusted_proxies = [\"127.0.0.1/32\"]\nuser_header = \"X-User-Id\"\n" +
            std::string(kIdentity) +
            "[[rules]]\nname = \"per-user\"\nkey = \"user\"\nalgorithm = \"fixed_window\"\n"
            "limit = 1\nwindow = \"1m\"\n");
  // alice's certificate names the user, whatever the trusted header says.
  EXPECT_EQ(Get(alice_, "-H 'X-User-Id: bob'").status, "200");
  // Without a certificate the trusted header counts: bob's own bucket.
  EXPECT_EQ(Get(none_, "-H 'X-User-Id: bob'").status, "200");
  EXPECT_EQ(Get(alice_, "-H 'X-User-Id: bob'").status, "429");
  EXPECT_EQ(Get(none_, "-H 'X-User-Id: bob'").status, "429");
}

TEST_F(ClientCertTest, Http2StreamsCarryTheConnectionsCertificate) {
  Start("client_ca = \"" + pki_->ca_file() + "\", client_cert = \"require\"",
        std::string(kIdentity) +
            "[[rules]]\nname = \"per-user\"\nkey = \"user\"\nalgorithm = \"fixed_window\"\n"
            "limit = 2\nwindow = \"1m\"\n");
  const CurlResult first = Get(alice_, "--http2 -H 'X-Client-Cert-Subject: forged'");
  ASSERT_EQ(first.status, "200");
  EXPECT_EQ(Field(first.body, "X-Client-Cert-Subject"), "CN=alice,OU=admins,O=Test");
  EXPECT_EQ(CountSpellings(first.body, "X-Client-Cert-Subject"), 1);
  // Three streams on one HTTP/2 connection: the third is over alice's limit.
  const std::string url = "https://127.0.0.1:" + std::to_string(gateway_->port()) + "/";
  // (-o applies to one URL: one each.)
  const std::string discard = " -o /dev/null " + url;
  const std::string out = Shell(
      "curl -s --http2 -w '%{http_version} %{http_code}\\n' --cacert " + pki_->server_cert() +
      " --cert " + bob_.cert + " --key " + bob_.key + discard + discard + discard);
  EXPECT_EQ(out, "2 200\n2 200\n2 429\n");
  const CurlResult refused = Get(none_, "--http2");
  EXPECT_EQ(refused.status, "000");
}

// Python's ssl module as the client: a certificate, none, an expired one.
TEST_F(ClientCertTest, PythonSslClients) {
  Start("client_ca = \"" + pki_->ca_file() + "\", client_cert = \"require\"", kIdentity);
  const std::string script = dir_.Write("client.py", R"(
import socket, ssl, sys
port, cafile = int(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context(cafile=cafile)
if len(sys.argv) > 3:
    ctx.load_cert_chain(sys.argv[3], sys.argv[4])
try:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            tls.sendall(b"GET /_test/headers HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                chunk = tls.recv(65536)
                if not chunk:
                    break
                data += chunk
    print(data.split(b"\r\n", 1)[0].decode())
    print("subject" if b"CN=alice,OU=admins,O=Test" in data else "no subject")
except (ssl.SSLError, ConnectionError) as e:
    print("refused:", type(e).__name__)
)");
  const std::string base = "/usr/bin/python3 " + script + " " + std::to_string(gateway_->port()) +
                           " " + pki_->server_cert();
  EXPECT_EQ(Shell(base + " " + alice_.cert + " " + alice_.key), "HTTP/1.1 200 OK\nsubject\n");
  EXPECT_EQ(Shell(base).rfind("refused:", 0), 0u);
  EXPECT_EQ(Shell(base + " " + expired_.cert + " " + expired_.key).rfind("refused:", 0), 0u);
}

// Reads the gateway's stderr until a line holds `needle` (at most 30 lines).
bool SawLine(Process& process, const std::string& needle) {
  for (int i = 0; i < 30; ++i) {
    const std::string line = process.StderrLine();
    if (line.find(needle) != std::string::npos) return true;
    if (line.empty()) return false;
  }
  return false;
}

// A certificate revoked after startup is refused once SIGHUP reloads the
// CRL, by full handshakes and by resumption of its earlier session alike.
TEST_F(ClientCertTest, RevocationTakesEffectOnSighup) {
  const std::string config =
      WithEchoPort(TlsConfig(TlsTable(*pki_, "client_ca = \"" + pki_->ca_file() +
                                                 "\", client_cert = \"require\", client_crl = \"" +
                                                 pki_->crl_file() + "\""),
                             kIdentity),
                   echo_->port());
  const std::string file = dir_.Write("tollgate.toml", config);
  Process gateway({TOLLGATE_BINARY, "--config", file});
  const std::uint16_t port = WaitForPort(gateway);
  EXPECT_EQ(Curl(*pki_, port, dave_).status, "200");
  const std::string session = dir_.path() + "/dave.session";
  const std::string s_client = "openssl s_client -connect 127.0.0.1:" + std::to_string(port) +
                               " -tls1_2 -cert " + dave_.cert + " -key " + dave_.key;
  EXPECT_NE(Shell(s_client + " -sess_out " + session + " </dev/null 2>&1").find("New, TLSv1.2"),
            std::string::npos);
  EXPECT_NE(Shell(s_client + " -sess_in " + session + " </dev/null 2>&1").find("Reused, TLSv1.2"),
            std::string::npos);

  pki_->Revoke(dave_);
  pki_->WriteCrl();
  gateway.Signal(SIGHUP);
  ASSERT_TRUE(SawLine(gateway, "is in force"));
  EXPECT_EQ(Curl(*pki_, port, dave_).status, "000");
  // The refusal is in the log with OpenSSL's reason (as nginx logs it).
  EXPECT_TRUE(SawLine(gateway,
                      "TLS handshake with 127.0.0.1 on 127.0.0.1:0 failed: certificate "
                      "verify failed: certificate revoked (certificate_revoked)"));
  std::string out;
  RunCommand(s_client + " -sess_in " + session + " 2>&1", "", out);
  EXPECT_EQ(out.find("Reused,"), std::string::npos) << out;
  EXPECT_NE(out.find("certificate revoked"), std::string::npos) << out;
  EXPECT_EQ(Curl(*pki_, port, alice_).status, "200");
  gateway.Signal(SIGTERM);
  EXPECT_EQ(gateway.Wait(), 0);
}

}  // namespace
}  // namespace tollgate::testing
