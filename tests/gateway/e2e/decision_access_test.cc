// Who may use the decision listener and with which limits (issue 44):
// [decision] allow (a connection from another address is closed), tls
// with client_cert = "require" (no certificate of client_ca, no call), and
// an RLS descriptor's own limit (Envoy's RateLimitDescriptor.limit), which
// replaces the matching rules' limits under a state of its own. Real
// peers: rls_client.py (python3-grpcio) and curl. Also what `tollgate
// import envoy-ratelimit` makes of envoyproxy/ratelimit's black list and
// shadow_mode, served.
#include <gtest/gtest.h>

#include <string>

#include "gateway/tools/import_envoy.h"
#include "tests/gateway/e2e/decision_fixture.h"
#include "tests/gateway/io/test_pki.h"

namespace tollgate::testing {
namespace {

// The status curl got from the check endpoint at 127.0.0.1:port, its
// connection from `source` (a loopback address); "000" when the
// connection was closed before an answer (curl then fails, which is what
// is tested). `options`: more of curl's.
std::string CheckStatus(std::uint16_t port, const std::string& source,
                        const std::string& scheme = "http", const std::string& options = "") {
  return Shell("curl -s -o /dev/null -w '%{http_code}' --max-time 5 --interface " + source + " " +
               options + " -H 'X-Original-URI: /' " + scheme +
               "://127.0.0.1:" + std::to_string(port) + "/check || true");
}

// allow = ["127.0.0.1/32"]: curl from 127.0.0.2 gets no answer (the
// connection is closed before a byte is read), from 127.0.0.1 the check's
// 200; an RLS client outside every allowed network gets no call through.
TEST_F(DecisionService, AllowClosesConnectionsFromOtherAddresses) {
  Start(kRlsRules, "allow = [\"127.0.0.1/32\"]\n");
  EXPECT_EQ(CheckStatus(decision_port(), "127.0.0.2"), "000");
  EXPECT_EQ(CheckStatus(decision_port(), "127.0.0.1"), "200");
  EXPECT_TRUE(Contains(Rls({RlsCall({kLogin})}), "0 status 0 code=OK limit=login 3/MINUTE"));
  Start(kRlsRules, "allow = [\"192.0.2.0/24\", \"2001:db8::/32\"]\n");
  EXPECT_TRUE(Contains(Rls({RlsCall({kLogin})}), "0 code=UNAVAILABLE"));
  EXPECT_EQ(CheckStatus(decision_port(), "127.0.0.1"), "000");
}

// tls with client_cert = "require": a client without a certificate of
// client_ca fails the handshake (gRPC and the check endpoint alike); one
// with such a certificate is served.
TEST_F(DecisionService, TlsWithRequiredClientCertificates) {
  const TempDir dir;
  TestPki pki(dir);
  Start(kRlsRules,
        TlsTable(pki, "client_cert = \"require\", client_ca = \"" + pki.ca_file() + "\"") + "\n");
  const ClientCert envoy = pki.Issue("envoy", "/O=Test/CN=envoy");
  const std::string trust = "--tls " + pki.server_cert();
  const std::string with_cert = trust + " --cert " + envoy.cert + " --key " + envoy.key;
  EXPECT_TRUE(Contains(Shell(RlsCommand(decision_port(), {RlsCall({kLogin})}, trust)),
                       "0 code=UNAVAILABLE"));
  EXPECT_TRUE(Contains(Shell(RlsCommand(decision_port(), {RlsCall({kLogin})}, with_cert)),
                       "0 status 0 code=OK limit=login 3/MINUTE remaining=2 "));
  const std::string curl_trust = "--cacert " + pki.server_cert();
  EXPECT_EQ(CheckStatus(decision_port(), "127.0.0.1", "https", curl_trust), "000");
  EXPECT_EQ(CheckStatus(decision_port(), "127.0.0.1", "https",
                        curl_trust + " --cert " + envoy.cert + " --key " + envoy.key),
            "200");
}

// A descriptor with its own limit (5 an hour) is decided by that limit in
// place of the rule's (3 a minute): five OK, then OVER_LIMIT, with the
// descriptor's limit in current_limit and the RateLimit fields; the
// rule's own state of the key is untouched (the same descriptor without a
// limit still has its 3), and another limit is another state.
TEST_F(DecisionService, RlsDescriptorLimitReplacesTheRulesLimit) {
  Start(kRlsRules);
  const std::string hourly = "{\"entries\":" + std::string(kLogin) + ",\"limit\":[5,\"HOUR\"]}";
  std::vector<std::string> calls(6, RlsCall({hourly}));
  calls.push_back(RlsCall({kLogin}));
  calls.push_back(RlsCall({"{\"entries\":" + std::string(kLogin) + ",\"limit\":[1,\"SECOND\"]}"}));
  const std::string out = Rls(calls);
  // The ManualClock is at 1,000,000 ms: the hour ends in 2,600 s.
  EXPECT_TRUE(Contains(out,
                       "0 code=OK overall=OK\n"
                       "0 status 0 code=OK limit=login 5/HOUR remaining=4 reset_ms=2600000\n"
                       "0 header RateLimit-Policy: \"login\";q=5;w=3600\n"));
  EXPECT_TRUE(
      Contains(out, "4 status 0 code=OK limit=login 5/HOUR remaining=0 reset_ms=2600000\n"));
  EXPECT_TRUE(Contains(out,
                       "5 code=OK overall=OVER_LIMIT\n"
                       "5 status 0 code=OVER_LIMIT limit=login 5/HOUR remaining=0 "
                       "reset_ms=2600000\n"));
  EXPECT_TRUE(Contains(out, "6 status 0 code=OK limit=login 3/MINUTE remaining=2 "));
  EXPECT_TRUE(Contains(out, "7 status 0 code=OK limit=login 1/SECOND remaining=0 "));
  // A limit of 0 refuses every call, as in envoyproxy/ratelimit.
  EXPECT_TRUE(Contains(
      Rls({RlsCall({"{\"entries\":" + std::string(kLoginOther) + ",\"limit\":[0,\"DAY\"]}"})}),
      "0 status 0 code=OVER_LIMIT limit=login 0/DAY remaining=0 "));
  // A limit that cannot be decided is refused, not ignored.
  EXPECT_TRUE(Contains(
      Rls({RlsCall({"{\"entries\":" + std::string(kLogin) + ",\"limit\":[3,\"UNKNOWN\"]}"})}),
      "0 code=INVALID_ARGUMENT details=descriptors[0].limit.unit: must be SECOND, MINUTE, HOUR, "
      "DAY, WEEK, MONTH or YEAR"));
}

// envoyproxy/ratelimit's black list (its README's example 3), imported
// and served: a listed address is OVER_LIMIT from its first call
// (requests_per_unit 0), another is limited by the entry without a value
// (2 a second), an unlimited one is OK; under shadow_mode a descriptor over
// its limit is OK, as envoyproxy/ratelimit answers it, and so is the call.
TEST_F(DecisionService, ImportedBlackListAndShadowModeAsEnvoyRatelimit) {
  const gateway::ImportResult imported = gateway::ImportEnvoyRatelimit(R"(domain: edge
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 2
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
  - key: remote_address
    value: 50.0.0.9
    rate_limit:
      unlimited: true
  - key: plan
    shadow_mode: true
    rate_limit:
      unit: minute
      requests_per_unit: 1
)",
                                                                       "config.yaml");
  ASSERT_TRUE(imported.errors.empty()) << imported.errors.front().message;
  Start(imported.toml);
  const auto address = [](const std::string& a) { return "[[\"remote_address\",\"" + a + "\"]]"; };
  const std::string plan = R"([["plan","free"]])";
  const std::string out = Rls({RlsCall({address("50.0.0.5")}), RlsCall({address("50.0.0.1")}),
                               RlsCall({address("50.0.0.1")}), RlsCall({address("50.0.0.1")}),
                               RlsCall({address("50.0.0.9")}), RlsCall({plan}), RlsCall({plan})});
  EXPECT_TRUE(Contains(out, "0 code=OK overall=OVER_LIMIT\n0 status 0 code=OVER_LIMIT "));
  EXPECT_TRUE(Contains(out, "1 status 0 code=OK limit=edge/remote_address 2/SECOND remaining=1 "));
  EXPECT_TRUE(Contains(out, "3 code=OK overall=OVER_LIMIT\n"));
  EXPECT_TRUE(Contains(out, "4 code=OK overall=OK\n4 status 0 code=OK\n"));
  EXPECT_TRUE(Contains(out,
                       "6 code=OK overall=OK\n6 status 0 code=OK limit=edge/plan 1/MINUTE "
                       "remaining=0 "));
}

}  // namespace
}  // namespace tollgate::testing
