// The fixture of the decision service's tests with real peers
// (decision_gateway_test.cc, decision_access_test.cc): a gateway with a
// [decision] listener, rls_client.py (Debian's python3-grpcio under
// /usr/bin/python3, with the stubs generated from gateway/decision/proto,
// TOLLGATE_RLS_STUBS) and curl, and the RLS rules most tests use.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/gateway/test_support.h"
#include "tests/support/admin.h"

namespace tollgate::testing {

inline const std::string kPython = "/usr/bin/python3";
inline const std::string kScripts = TOLLGATE_DECISION_SCRIPTS;
inline const std::string kStubs = TOLLGATE_RLS_STUBS;

inline ::testing::AssertionResult Contains(const std::string& out, const std::string& text) {
  if (out.find(text) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "no \"" << text << "\" in:\n" << out;
}

inline ::testing::AssertionResult Lacks(const std::string& out, const std::string& text) {
  if (out.find(text) == std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" in:\n" << out;
}

// One ShouldRateLimit call of rls_client.py (see there): domain "edge",
// one descriptor per element of `descriptors` (a JSON array of entries,
// e.g. [["path","/login"]]), then `more` (",\"hits_addend\":2").
inline std::string RlsCall(const std::vector<std::string>& descriptors,
                           const std::string& more = "") {
  std::string call = "{\"domain\":\"edge\",\"descriptors\":[";
  for (std::size_t i = 0; i < descriptors.size(); ++i) {
    if (i > 0) call += ',';
    call += descriptors[i].front() == '{' ? descriptors[i] : "{\"entries\":" + descriptors[i] + "}";
  }
  return call + "]" + more + "}";
}

inline std::string Quote(const std::string& s) {
  std::string out = "'";
  for (const char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

inline constexpr const char* kLogin = R"([["remote_address","10.0.0.1"],["path","/login"]])";
// The same entries in another order, as Envoy sends them when its actions
// are listed so.
inline constexpr const char* kLoginReordered =
    R"([["path","/login"],["remote_address","10.0.0.1"]])";
inline constexpr const char* kLoginOther = R"([["remote_address","10.0.0.2"],["path","/login"]])";

inline constexpr const char* kRlsRules = R"(
[[rules]]
name = "login"
match = { domain = "edge", descriptor = { remote_address = "*", path = "/login" } }
key = "descriptor"
algorithm = "fixed_window"
limit = 3
window = "1m"
[[rules]]
name = "tenant"
match = { domain = "edge", descriptor = { tenant = "*" } }
key = "descriptor"
algorithm = "token_bucket"
limit = 10
window = "1s"
[[rules]]
name = "http-only"
key = "global"
algorithm = "fixed_window"
limit = 1
window = "1h"
)";

class DecisionService : public ::testing::Test {
 protected:
  // A gateway (one thread, the echo upstream behind route "/") with a
  // [decision] listener on a free port (`decision_keys` in its section),
  // then `extra`; a ManualClock unless `clock` says otherwise.
  void Start(const std::string& extra, const std::string& decision_keys = "",
             TestClock clock = TestClock::kManual) {
    if (!echo_) echo_ = StartEcho();
    gateway_ = std::make_unique<TestGateway>(
        BasicConfig("[decision]\naddress = \"127.0.0.1:0\"\n" + decision_keys + extra),
        echo_->port(), clock);
    ASSERT_NE(gateway_->server().decision_port(), 0);
  }

  // Start(), with the admin API's token (kAdminToken) configured.
  void StartWithAdminToken(const std::string& extra) {
    if (!echo_) echo_ = StartEcho();
    gateway_ = std::make_unique<TestGateway>(
        WithAdminTokenFile(BasicConfig("[decision]\naddress = \"127.0.0.1:0\"\n" + extra),
                           dir_.Write("token", std::string(kAdminToken))),
        echo_->port(), TestClock::kManual);
  }
  // One admin API call with the token.
  Response Admin(const std::string& method, const std::string& target,
                 const std::string& body = "") {
    return AdminRequest(gateway_->admin_port(), method, target, Bearer(), body);
  }

  std::uint16_t decision_port() { return gateway_->server().decision_port(); }

  // rls_client.py with `calls`, each a JSON object; over TLS trusting
  // `tls_cert` when given.
  std::string Rls(const std::vector<std::string>& calls, const std::string& tls_cert = "") {
    return Shell(RlsCommand(decision_port(), calls, tls_cert.empty() ? "" : "--tls " + tls_cert));
  }
  // `options`: rls_client.py's (--tls CERT, --cert CERT --key KEY).
  static std::string RlsCommand(std::uint16_t port, const std::vector<std::string>& calls,
                                const std::string& options = "") {
    std::string command = kPython + " " + kScripts + "/rls_client.py --stubs " + kStubs + " " +
                          options + " " + std::to_string(port);
    for (const std::string& call : calls) command += " " + Quote(call);
    return command;
  }

  // curl -si against the check endpoint with the header lines `headers`;
  // `options` before them (e.g. --interface).
  std::string Check(const std::vector<std::string>& headers, const std::string& options = "",
                    const std::string& target = "/check") {
    std::string command = "curl -si " + options;
    for (const std::string& h : headers) command += " -H " + Quote(h);
    return Shell(command + " http://127.0.0.1:" + std::to_string(decision_port()) + target);
  }

  std::string Metrics() {
    Client admin(gateway_->admin_port());
    return admin.Get("/metrics").body();
  }

  TempDir dir_;
  std::unique_ptr<gateway::EchoUpstream> echo_;
  std::unique_ptr<TestGateway> gateway_;
};

}  // namespace tollgate::testing
