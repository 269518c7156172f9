// What the upstream is told about who sent a request, through the real
// proxy: identity headers in any spelling, X-Real-IP, True-Client-IP and
// Forwarded from peers that are and are not trusted proxies, and the client
// an X-Forwarded-For entry that is no address stands for. The client
// connects from 127.0.0.1 (not trusted) or 127.0.0.2 (the trusted proxy).
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json/parse.hpp>
#include <cctype>
#include <string>
#include <vector>

#include "test_support.h"

namespace tollgate::testing {
namespace {

constexpr const char* kStranger = "127.0.0.1";
constexpr const char* kProxy = "127.0.0.2";

constexpr const char* kIdentity = R"(
[identity]
trusted_proxies = ["127.0.0.2/32"]
user_header = "X-User-Id"
role_header = "X-User-Role"
)";

// One rule per test, limit 1 a minute (the clock does not move).
std::string OneRule(const std::string& key) {
  return std::string(kIdentity) + "[[rules]]\nname = \"one\"\nkey = \"" + key +
         "\"\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1m\"\n";
}

// How a CGI server names a field: upper case, '-' as '_'.
std::string CgiName(std::string_view name) {
  std::string out;
  for (const char c : name) {
    out.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  }
  return out;
}

class IdentityHeadersTest : public ::testing::Test {
 protected:
  void SetUp() override { echo_ = StartEcho(); }
  void StartGateway(const std::string& extra) {
    gateway_ = std::make_unique<TestGateway>(BasicConfig(extra), echo_->port());
  }
  Response Get(const char* from, const std::string& headers) {
    Client client(gateway_->port(), 5000, from);
    return client.Get("/_test/headers", headers);
  }
  // The fields the upstream received, "Name: value" for each whose CGI name
  // is `cgi` (the echo joins repeated lines with ",").
  std::vector<std::string> Received(const Response& res, std::string_view cgi) {
    std::vector<std::string> out;
    const boost::json::value fields = boost::json::parse(res.body());
    for (const auto& [name, value] : fields.as_object()) {
      if (CgiName(name) == cgi) out.push_back(std::string(name) + ": " + value.as_string().c_str());
    }
    return out;
  }

  std::unique_ptr<gateway::EchoUpstream> echo_;
  std::unique_ptr<TestGateway> gateway_;
};

using Fields = std::vector<std::string>;

TEST_F(IdentityHeadersTest, NoSpellingOfAnIdentityHeaderPassesFromAPeerThatIsNotTrusted) {
  StartGateway(OneRule("user"));
  const std::string claims =
      "X-User-Id: a\r\nX_User_Id: b\r\nx_user_id: c\r\nX-USER_ROLE: admin\r\n"
      "X_User-Role: admin\r\n";
  for (int i = 0; i < 2; ++i) {
    const Response res = Get(kStranger, claims);
    // Not read either: anonymous, so the per-user rule never applies.
    ASSERT_EQ(res.result_int(), 200) << i;
    EXPECT_EQ(Received(res, "X_USER_ID"), Fields{});
    EXPECT_EQ(Received(res, "X_USER_ROLE"), Fields{});
  }
  // A trusted proxy's header is read and passed on; another spelling of it
  // is neither (tollgate does not read it, a CGI server would).
  const Response alice = Get(kProxy, "X-User-Id: alice\r\nX_User_Id: mallory\r\n");
  ASSERT_EQ(alice.result_int(), 200);
  EXPECT_EQ(Received(alice, "X_USER_ID"), Fields{"X-User-Id: alice"});
  EXPECT_EQ(Get(kProxy, "X-User-Id: alice\r\n").result_int(), 429);
  EXPECT_EQ(Get(kProxy, "X_User_Id: alice\r\n").result_int(), 200);
}

TEST_F(IdentityHeadersTest, APeerThatIsNotTrustedCannotNameAClientAddress) {
  StartGateway(kIdentity);
  for (const std::string connection : {"", "Connection: X-Real-IP\r\n"}) {
    const Response res =
        Get(kStranger, connection +
                           "X-Real-IP: 6.6.6.1\r\nX_Real_IP: 6.6.6.2\r\n"
                           "True-Client-IP: 6.6.6.3\r\ntrue_client_ip: 6.6.6.4\r\n"
                           "Forwarded: for=6.6.6.5;proto=https\r\nforwarded: for=6.6.6.6\r\n"
                           "X_Forwarded_For: 6.6.6.7\r\n");
    ASSERT_EQ(res.result_int(), 200);
    EXPECT_EQ(Received(res, "X_REAL_IP"), Fields{"X-Real-IP: 127.0.0.1"}) << connection;
    EXPECT_EQ(Received(res, "TRUE_CLIENT_IP"), Fields{});
    EXPECT_EQ(Received(res, "FORWARDED"), Fields{});
    EXPECT_EQ(Received(res, "X_FORWARDED_FOR"), Fields{"X-Forwarded-For: 127.0.0.1"});
  }
}

TEST_F(IdentityHeadersTest, ATrustedProxysHeadersStayAndXRealIpIsTheClientItNamed) {
  StartGateway(kIdentity);
  const Response res =
      Get(kProxy,
          "X-Forwarded-For: 6.6.6.6, 198.51.100.7\r\nX-Real-IP: 10.9.9.9\r\n"
          "Connection: X-Real-IP\r\nTrue-Client-IP: 198.51.100.7\r\nTrue_Client_IP: 6.6.6.6\r\n"
          "Forwarded: for=198.51.100.7;proto=https\r\nX_Real_IP: 6.6.6.6\r\n");
  ASSERT_EQ(res.result_int(), 200);
  EXPECT_EQ(Received(res, "X_REAL_IP"), Fields{"X-Real-IP: 198.51.100.7"});
  EXPECT_EQ(Received(res, "TRUE_CLIENT_IP"), Fields{"True-Client-IP: 198.51.100.7"});
  EXPECT_EQ(Received(res, "FORWARDED"),
            Fields{"Forwarded: for=198.51.100.7;proto=https, for=127.0.0.2;proto=http;host=test"});
  EXPECT_EQ(Received(res, "X_FORWARDED_FOR"),
            Fields{"X-Forwarded-For: 6.6.6.6, 198.51.100.7, 127.0.0.2"});
  // The proxy's own request (no X-Forwarded-For).
  EXPECT_EQ(Received(Get(kProxy, ""), "X_REAL_IP"), Fields{"X-Real-IP: 127.0.0.2"});
}

TEST_F(IdentityHeadersTest, AForwardedForEntryThatIsNoAddressIsNeverTheProxysKey) {
  StartGateway(OneRule("ip"));
  // The proxy's own budget, used up.
  ASSERT_EQ(Get(kProxy, "").result_int(), 200);
  ASSERT_EQ(Get(kProxy, "").result_int(), 429);
  const Response unknown = Get(kProxy, "X-Forwarded-For: unknown\r\n");
  EXPECT_EQ(unknown.result_int(), 200);
  EXPECT_EQ(Received(unknown, "X_REAL_IP"), Fields{"X-Real-IP: unknown"});
  EXPECT_EQ(Get(kProxy, "X-Forwarded-For: 198.51.100.9, unknown\r\n").result_int(), 429);
  EXPECT_EQ(Get(kProxy, "X-Forwarded-For: garbage\r\n").result_int(), 200);
  // An address with its port is that address.
  const Response with_port = Get(kProxy, "X-Forwarded-For: 198.51.100.7:5678\r\n");
  EXPECT_EQ(with_port.result_int(), 200);
  EXPECT_EQ(Received(with_port, "X_REAL_IP"), Fields{"X-Real-IP: 198.51.100.7"});
  EXPECT_EQ(Get(kProxy, "X-Forwarded-For: 198.51.100.7\r\n").result_int(), 429);
}

}  // namespace
}  // namespace tollgate::testing
