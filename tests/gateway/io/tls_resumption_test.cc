// TLS session resumption at a listener (gateway/io/ticket_keys.cc,
// gateway/io/session_cache.cc): TLS 1.3 tickets, TLS 1.2 tickets and
// session IDs, on every thread of a 2-thread gateway, after SIGHUP, with a
// ticket key file shared by two gateways, and generated keys' rotation.
// Also the handshake and certificate metrics and the status page's
// certificates. Client: openssl s_client (-sess_out/-sess_in, -reconnect).
#include <gtest/gtest.h>
#include <signal.h>

#include <boost/json/parse.hpp>
#include <string>

#include "prometheus.h"
#include "test_pki.h"

namespace tollgate::testing {
namespace {

enum class Resume { kTls13, kTls12Ticket, kTls12SessionId };

std::string Options(Resume kind) {
  switch (kind) {
    case Resume::kTls13:
      return "-tls1_3";
    case Resume::kTls12Ticket:
      return "-tls1_2";
    case Resume::kTls12SessionId:
      return "-tls1_2 -no_ticket";
  }
  return "";
}

// One connection with openssl s_client that sends a request and reads the
// answer (so a TLS 1.3 ticket, which comes after the handshake, is read
// too), saving its session to `out` and resuming `in` (either may be
// empty). Returns s_client's output.
std::string Connect(std::uint16_t port, Resume kind, const std::string& in, const std::string& out) {
  std::string command = "openssl s_client -connect 127.0.0.1:" + std::to_string(port) + " " +
                        Options(kind) + " -ign_eof";
  if (!in.empty()) command += " -sess_in " + in;
  if (!out.empty()) command += " -sess_out " + out;
  std::string output;
  RunCommand(command + " 2>&1", "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", output);
  return output;
}

bool Reused(const std::string& output) { return output.find("Reused, TLSv1.") != std::string::npos; }
bool Fresh(const std::string& output) { return output.find("New, TLSv1.") != std::string::npos; }

class ResumptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    echo_ = StartEcho();
    pki_ = std::make_unique<TestPki>(dir_);
  }
  std::string Config(const std::string& tls_extra, int threads) {
    return TlsConfig(TlsTable(*pki_, tls_extra), "", threads);
  }
  std::string Session(const std::string& name) { return dir_.path() + "/" + name + ".session"; }

  TempDir dir_;
  std::unique_ptr<gateway::EchoUpstream> echo_;
  std::unique_ptr<TestPki> pki_;
};

// The kernel spreads a client's connections over both threads' sockets
// (SO_REUSEPORT, by source port): eight resumptions all resume whichever
// thread made the session.
TEST_F(ResumptionTest, EveryKindResumesOnEveryThreadOfATwoThreadGateway) {
  TestGateway gateway(Config("", 2), echo_->port());
  for (const Resume kind : {Resume::kTls13, Resume::kTls12Ticket, Resume::kTls12SessionId}) {
    const std::string session = Session("s" + std::to_string(static_cast<int>(kind)));
    const std::string first = Connect(gateway.port(), kind, "", session);
    ASSERT_TRUE(Fresh(first)) << first;
    EXPECT_NE(first.find("HTTP/1.1 200"), std::string::npos) << first;
    for (int i = 0; i < 8; ++i) {
      const std::string again = Connect(gateway.port(), kind, session, "");
      EXPECT_TRUE(Reused(again)) << Options(kind) << "\n" << again;
      EXPECT_NE(again.find("HTTP/1.1 200"), std::string::npos);
    }
  }
}

// TLS 1.2 only: OpenSSL 3.0's s_client -reconnect drops each connection as
// soon as its handshake is done, before a TLS 1.3 ticket (sent after the
// handshake) is read, so it never resumes TLS 1.3, not even against
// openssl s_server; -sess_out/-sess_in above show TLS 1.3 resumption. The
// client closes first here, without reading: the session ID must survive
// a connection the gateway did not shut down itself.
// A TLS 1.3 resumption gets a new ticket, whose session resumes again, so a
// client that reconnects over and over (wrk with Connection: close does)
// resumes every time rather than every other time: its ticket was used.
// (A TLS 1.2 session resumes again as it is: s_client -sess_out writes no
// session after a TLS 1.2 resumption, and the test above resumes one
// session eight times.)
TEST_F(ResumptionTest, ATls13ResumptionIssuesATicketThatResumes) {
  TestGateway gateway(Config("", 1), echo_->port());
  ASSERT_TRUE(Fresh(Connect(gateway.port(), Resume::kTls13, "", Session("chain0"))));
  for (int i = 1; i <= 3; ++i) {
    const std::string out = Connect(gateway.port(), Resume::kTls13,
                                    Session("chain" + std::to_string(i - 1)),
                                    Session("chain" + std::to_string(i)));
    EXPECT_TRUE(Reused(out)) << i << "\n" << out;
  }
}

TEST_F(ResumptionTest, SClientReconnect) {
  TestGateway gateway(Config("", 2), echo_->port());
  for (const Resume kind : {Resume::kTls12Ticket, Resume::kTls12SessionId}) {
    std::string out;
    RunCommand("openssl s_client -connect 127.0.0.1:" + std::to_string(gateway.port()) + " " +
                   Options(kind) + " -reconnect 2>&1",
               "", out);
    std::size_t reused = 0;
    for (std::size_t at = out.find("Reused, TLSv1."); at != std::string::npos;
         at = out.find("Reused, TLSv1.", at + 1)) {
      ++reused;
    }
    // One full handshake, then five reconnections that resume.
    EXPECT_EQ(reused, 5u) << Options(kind) << "\n" << out;
  }
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

TEST_F(ResumptionTest, SessionsResumeAfterSighup) {
  const std::string config = WithEchoPort(Config("", 2), echo_->port());
  const std::string file = dir_.Write("tollgate.toml", config);
  Process gateway({TOLLGATE_BINARY, "--config", file});
  const std::uint16_t port = WaitForPort(gateway);
  for (const Resume kind : {Resume::kTls13, Resume::kTls12Ticket, Resume::kTls12SessionId}) {
    ASSERT_TRUE(Fresh(Connect(port, kind, "", Session("sighup" + std::to_string(static_cast<int>(kind))))));
  }
  // A changed configuration (a new rule) takes over the listener.
  dir_.Write("tollgate.toml", config + "[[rules]]\nname = \"r\"\nkey = \"ip\"\n"
                                       "algorithm = \"fixed_window\"\nlimit = 100\nwindow = \"1m\"\n");
  gateway.Signal(SIGHUP);
  ASSERT_TRUE(SawLine(gateway, "is in force"));
  for (const Resume kind : {Resume::kTls13, Resume::kTls12Ticket, Resume::kTls12SessionId}) {
    for (int i = 0; i < 4; ++i) {
      const std::string out = Connect(port, kind, Session("sighup" + std::to_string(static_cast<int>(kind))), "");
      EXPECT_TRUE(Reused(out)) << Options(kind) << "\n" << out;
    }
  }
  gateway.Signal(SIGTERM);
  EXPECT_EQ(gateway.Wait(), 0);
}

// Two gateways with the same ticket key file (nginx's format) resume each
// other's tickets; one with its own generated keys does not.
TEST_F(ResumptionTest, ATicketKeyFileIsSharedByGateways) {
  for (const int size : {80, 48}) {
    const std::string key = dir_.path() + "/ticket" + std::to_string(size) + ".key";
    Shell("openssl rand " + std::to_string(size) + " > " + key);
    const std::string shared = "ticket_key_file = \"" + key + "\"";
    TestGateway a(Config(shared, 1), echo_->port());
    TestGateway b(Config("ticket_key_file = [\"" + key + "\"]", 1), echo_->port());
    TestGateway other(Config("", 1), echo_->port());
    for (const Resume kind : {Resume::kTls13, Resume::kTls12Ticket}) {
      const std::string session = Session("shared" + std::to_string(size));
      ASSERT_TRUE(Fresh(Connect(a.port(), kind, "", session)));
      EXPECT_TRUE(Reused(Connect(b.port(), kind, session, ""))) << size << " " << Options(kind);
      EXPECT_FALSE(Reused(Connect(other.port(), kind, session, ""))) << Options(kind);
    }
  }
}

// Generated keys: a new one encrypts every ticket_rotation; the one before
// still decrypts for one rotation more, then its tickets no longer resume.
TEST_F(ResumptionTest, GeneratedTicketKeysRotate) {
  TestGateway gateway(Config("ticket_rotation = \"1h\"", 1), echo_->port());
  const std::string session = Session("rotation");
  ASSERT_TRUE(Fresh(Connect(gateway.port(), Resume::kTls13, "", session)));
  constexpr std::int64_t kMinute = 60'000;
  gateway.clock().Advance(30 * kMinute);
  EXPECT_TRUE(Reused(Connect(gateway.port(), Resume::kTls13, session, "")));
  gateway.clock().Advance(60 * kMinute);  // rotated: the key retires now
  EXPECT_TRUE(Reused(Connect(gateway.port(), Resume::kTls13, session, "")));
  gateway.clock().Advance(61 * kMinute);
  EXPECT_TRUE(Fresh(Connect(gateway.port(), Resume::kTls13, session, "")));
}

TEST_F(ResumptionTest, HandshakeAndCertificateMetricsAndTheStatusPage) {
  TestGateway gateway(Config("client_ca = \"" + pki_->ca_file() + "\", client_cert = \"require\"", 2),
                      echo_->port());
  const ClientCert alice = pki_->Issue("alice", "/CN=alice");
  const std::string session = Session("metrics");
  const std::string client = "-cert " + alice.cert + " -key " + alice.key;
  std::string out;
  RunCommand("openssl s_client -connect 127.0.0.1:" + std::to_string(gateway.port()) +
                 " -tls1_2 -sess_out " + session + " " + client + " </dev/null 2>&1",
             "", out);
  for (int i = 0; i < 3; ++i) {
    RunCommand("openssl s_client -connect 127.0.0.1:" + std::to_string(gateway.port()) +
                   " -tls1_2 -sess_in " + session + " " + client + " </dev/null 2>&1",
               "", out);
    EXPECT_TRUE(Reused(out)) << out;
  }
  // Without a certificate: refused.
  RunCommand("openssl s_client -connect 127.0.0.1:" + std::to_string(gateway.port()) +
                 " -tls1_2 </dev/null 2>&1",
             "", out);

  Client admin(gateway.admin_port());
  const std::string metrics = admin.Get("/metrics").body();
  const std::string series = "tollgate_tls_handshakes_total{listener=\"127.0.0.1:0\",result=";
  EXPECT_EQ(SampleText(metrics, series + "\"ok\"}"), "1") << metrics;
  EXPECT_EQ(SampleText(metrics, series + "\"resumed\"}"), "3");
  EXPECT_EQ(SampleText(metrics, series + "\"failed\"}"), "1");
  const std::string not_after = Shell("date -d \"$(openssl x509 -noout -enddate -in " +
                                      pki_->server_cert() + " | cut -d= -f2)\" +%s");
  EXPECT_EQ(SampleText(metrics, "tollgate_tls_certificate_expiry_timestamp_seconds{certificate=\"" +
                                pki_->server_cert() + "\"}") + "\n",
            not_after);

  const boost::json::value status = boost::json::parse(admin.Get("/status.json").body());
  const auto& certificates = status.at("certificates").as_array();
  ASSERT_EQ(certificates.size(), 1u);
  EXPECT_EQ(certificates[0].at("file").as_string(), pki_->server_cert());
  EXPECT_EQ(certificates[0].at("subject").as_string(), "CN=gateway.test");
  EXPECT_EQ(certificates[0].at("not_after_ms").as_int64(), std::stoll(not_after) * 1000);
  EXPECT_EQ(certificates[0].at("listener").as_string(), "127.0.0.1:0");
}

}  // namespace
}  // namespace tollgate::testing
