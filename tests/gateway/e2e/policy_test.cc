// conf/tollgate.toml's policy, line by line, through the real proxy. Time is
// the gateway's ManualClock: windows pass without sleeping.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "rules/jwt.h"
#include "test_support.h"

namespace tollgate::testing {
namespace {

class Policy : public ::testing::Test {
 protected:
  void SetUp() override {
    echo_ = StartEcho();
    // The example's relative paths (certificate, JWT secret) are relative to
    // the repository root, as with `make run`.
    std::filesystem::current_path(TOLLGATE_SOURCE_DIR);
    rules::LoadResult loaded = rules::LoadConfigFile("conf/tollgate.toml");
    for (const auto& e : loaded.errors) ADD_FAILURE() << e.ToString();
    ASSERT_TRUE(loaded.config);
    rules::Config config = *loaded.config;
    config.listeners.resize(1);  // plain HTTP is enough here
    config.listeners[0].address.port = 0;
    config.admin.address.port = 0;
    config.log.access = "off";
    config.upstreams[0].servers[0].port = echo_->port();
    gateway_ = std::make_unique<TestGateway>(config);
  }

  Response As(const std::string& user, const std::string& role,
              const std::string& target = "/account", const std::string& method = "GET") {
    Client client(gateway_->port());
    std::string headers;
    if (!user.empty()) headers += "X-User-Id: " + user + "\r\n";
    if (!role.empty()) headers += "X-User-Role: " + role + "\r\n";
    client.Send(method + " " + target + " HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n" + headers +
                "\r\n");
    return client.Read();
  }
  // How many of `n` requests pass.
  int Passing(int n, const std::function<Response()>& send) {
    int ok = 0;
    for (int i = 0; i < n; ++i) ok += send().result_int() == 200 ? 1 : 0;
    return ok;
  }
  void Advance(std::int64_t ms) { gateway_->clock().Advance(ms); }

  std::unique_ptr<gateway::EchoUpstream> echo_;
  std::unique_ptr<TestGateway> gateway_;
};

TEST_F(Policy, AdminsAreExempt) {
  EXPECT_EQ(Passing(300, [&] { return As("root", "admin"); }), 300);
  Response res = As("root", "admin");
  EXPECT_EQ(res.count("RateLimit"), 0u);
}

TEST_F(Policy, PremiumUsersGet1000PerMinutePerUser) {
  EXPECT_EQ(Passing(1001, [&] { return As("p1", "premium"); }), 1000);
  Response limited = As("p1", "premium");
  EXPECT_EQ(limited.result_int(), 429);
  EXPECT_NE(limited.body().find("\"rule\":\"premium\""), std::string::npos);
  EXPECT_EQ(As("p2", "premium").result_int(), 200);  // per user
  Advance(60);                                       // 1000/min refills one token per 60 ms
  EXPECT_EQ(As("p1", "premium").result_int(), 200);
  EXPECT_EQ(As("p1", "premium").result_int(), 429);
}

TEST_F(Policy, OtherUsersGet100PerMinuteAnd1000PerHour) {
  Response first = As("u1", "user");
  EXPECT_EQ(first["RateLimit"], "\"per-user:1m\";r=99;t=60");
  EXPECT_EQ(first["X-RateLimit-Remaining"], "99");
  EXPECT_EQ(Passing(100, [&] { return As("u1", "user"); }), 99);
  Response limited = As("u1", "user");
  ASSERT_EQ(limited.result_int(), 429);
  EXPECT_EQ(limited["Retry-After"], "60");
  EXPECT_EQ(limited["RateLimit-Policy"],
            "\"per-user:1m\";q=100;w=60, \"per-user:1h\";q=1000;w=3600");
  EXPECT_EQ(limited["RateLimit"], "\"per-user:1m\";r=0;t=60");
  EXPECT_EQ(limited["X-RateLimit-Limit"], "100");
  EXPECT_EQ(limited["X-RateLimit-Remaining"], "0");
  EXPECT_EQ(limited["X-RateLimit-Reset"], "60");
  EXPECT_EQ(limited[http::field::content_type], "application/json");
  // The answer names the request (X-Request-Id, docs/proxying.md).
  EXPECT_EQ(limited.body(), "{\"error\":\"rate_limited\",\"rule\":\"per-user\",\"retry_after_ms\":60000,"
                            "\"request_id\":\"" + std::string(limited["X-Request-Id"]) + "\"}\n");
  EXPECT_EQ(limited["X-Request-Id"].size(), 32u);
  EXPECT_EQ(As("u2", "user").result_int(), 200);  // per user
  // Nine more minutes of 100 each fill the hour's 1000.
  for (int minute = 1; minute < 10; ++minute) {
    Advance(60'000);
    EXPECT_EQ(Passing(101, [&] { return As("u1", "user"); }), 100) << "minute " << minute;
  }
  Advance(60'000);
  Response hourly = As("u1", "user");
  ASSERT_EQ(hourly.result_int(), 429);
  // The first of the 1000 (at minute 0) leaves the hour window at 60:00: 50 min from now.
  EXPECT_EQ(hourly["Retry-After"], "3000");
  EXPECT_EQ(hourly["X-RateLimit-Limit"], "1000");
}

TEST_F(Policy, UsersWithAnotherRoleOrNoneAreLimitedPerUserToo) {
  // "Other authenticated users" are every user but admins and premium ones:
  // a token without a role claim gets no more than a plain user.
  for (const std::string role : {"", "guest"}) {
    const std::string user = "r-" + role;
    EXPECT_EQ(Passing(101, [&] { return As(user, role); }), 100) << "role '" << role << "'";
    Response limited = As(user, role);
    EXPECT_NE(limited.body().find("\"rule\":\"per-user\""), std::string::npos);
  }
}

TEST_F(Policy, AnonymousClientsGet20PerMinutePerIp) {
  EXPECT_EQ(Passing(21, [&] { return As("", ""); }), 20);
  Response limited = As("", "");
  EXPECT_EQ(limited.result_int(), 429);
  EXPECT_NE(limited.body().find("\"rule\":\"anonymous\""), std::string::npos);
  // Another client behind the trusted proxy (127.0.0.1) has its own budget.
  Client other(gateway_->port());
  EXPECT_EQ(other.Get("/account", "X-Forwarded-For: 198.51.100.7\r\n").result_int(), 200);
  Advance(60'000);
  EXPECT_EQ(As("", "").result_int(), 200);
}

TEST_F(Policy, LoginIsFivePerMinutePerIpExactly) {
  EXPECT_EQ(Passing(5, [&] { return As("", "", "/login", "POST"); }), 5);
  Response limited = As("", "", "/login", "POST");
  ASSERT_EQ(limited.result_int(), 429);
  EXPECT_NE(limited.body().find("\"rule\":\"login\""), std::string::npos);
  Advance(59'999);
  EXPECT_EQ(As("", "", "/login", "POST").result_int(), 429);  // a sliding window, exact
  Advance(1);
  EXPECT_EQ(As("", "", "/login", "POST").result_int(), 200);
}

TEST_F(Policy, ApiHasAGlobalCapOf5000PerSecondWithBurst500) {
  int ok = 0;
  for (int i = 0; i < 501; ++i) {
    ok += As("g" + std::to_string(i), "premium", "/api/x").result_int() == 200 ? 1 : 0;
  }
  EXPECT_EQ(ok, 500);
  Response limited = As("another", "premium", "/api/x");
  EXPECT_NE(limited.body().find("\"rule\":\"api-global\""), std::string::npos);
  Advance(1);  // 5000/s: five tokens per millisecond
  EXPECT_EQ(Passing(6, [&] { return As("later", "premium", "/api/x"); }), 5);
}

TEST_F(Policy, UntrustedPeersCannotSpoofIdentityOrIp) {
  // 127.0.0.2 is not a trusted proxy: its X-User-* and X-Forwarded-For count
  // for nothing; it is anonymous client 127.0.0.2.
  auto spoof = [&](const std::string& xff) {
    Client c(gateway_->port(), 5000, "127.0.0.2");
    return c.Get("/_test/headers",
                 "X-User-Id: root\r\nX-User-Role: admin\r\nX-Forwarded-For: " + xff + "\r\n");
  };
  Response first = spoof("1.1.1.1");
  EXPECT_EQ(first.body().find("X-User-Id"), std::string::npos) << "stripped before forwarding";
  EXPECT_NE(first.body().find("\"X-Forwarded-For\":\"1.1.1.1, 127.0.0.2\""), std::string::npos);
  int ok = 1;
  for (int i = 0; i < 20; ++i) ok += spoof("2.2.2." + std::to_string(i)).result_int() == 200;
  EXPECT_EQ(ok, 20);  // one budget, whatever the header claims
}

TEST_F(Policy, BearerTokensIdentifyUsers) {
  std::ifstream secret_file("conf/dev/jwt-secret");
  std::string secret;
  std::getline(secret_file, secret);
  const std::string input = rules::Base64UrlEncode(R"({"alg":"HS256","typ":"JWT"})") + "." +
                            rules::Base64UrlEncode(R"({"sub":"jwt-user","role":"user"})");
  unsigned char mac[32];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac, &len);
  const std::string token =
      input + "." + rules::Base64UrlEncode(std::string_view(reinterpret_cast<char*>(mac), len));
  Client client(gateway_->port(), 5000, "127.0.0.2");  // untrusted peer: the token still counts
  Response res = client.Get("/account", "Authorization: Bearer " + token + "\r\n");
  EXPECT_EQ(res.result_int(), 200);
  EXPECT_EQ(res["RateLimit"], "\"per-user:1m\";r=99;t=60");
  // A forged token falls back to anonymous (on_invalid = "anonymous").
  Client forged(gateway_->port(), 5000, "127.0.0.2");
  Response anon = forged.Get("/account", "Authorization: Bearer " + token + "x\r\n");
  EXPECT_EQ(anon["RateLimit"], "\"anonymous\";r=19;t=60");
}

}  // namespace
}  // namespace tollgate::testing
