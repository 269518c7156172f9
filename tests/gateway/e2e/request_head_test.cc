// One check of a request's head and one filter of its trailers, whichever
// protocol brought them: malformed authorities, methods, schemes and
// targets are 400 over HTTP/1.1 and HTTP/2 alike, and no trailer forges
// what identity or forwarding set in the header. Real peers: raw HTTP/1.1
// and python3-h2 (http2/h2_head_peer.py, /usr/bin/python3), through the
// gateway to the echo upstream, whose /_test/headers reports every field
// it received, trailers included.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <string>
#include <vector>

#include "tests/gateway/test_support.h"

namespace tollgate::testing {
namespace {

const std::string kPython = "/usr/bin/python3";
const std::string kScripts = TOLLGATE_HTTP2_SCRIPTS;

constexpr const char* kIdentity = R"(
[identity]
user_header = "X-User-Id"
role_header = "X-User-Role"
)";

std::string HeadPeer(const std::string& scenario, std::uint16_t port) {
  std::string out;
  const int rc = RunCommand(kPython + " " + kScripts + "/h2_head_peer.py " + scenario + " " +
                                std::to_string(port) + " 2>&1",
                            "", out);
  EXPECT_EQ(rc, 0) << scenario << ": " << out;
  return out;
}

class RequestHead : public ::testing::Test {
 protected:
  void SetUp() override {
    echo_ = StartEcho();
    gateway_ = std::make_unique<TestGateway>(BasicConfig(kIdentity), echo_->port());
  }
  // The status of one raw HTTP/1.1 request on a connection of its own.
  unsigned Status(const std::string& raw) {
    Client client(gateway_->port());
    client.Send(raw);
    return client.Read().result_int();
  }
  std::unique_ptr<gateway::EchoUpstream> echo_;
  std::unique_ptr<TestGateway> gateway_;
};

TEST_F(RequestHead, MalformedHeadsAre400OverHttp1) {
  for (const std::string head :
       {"GET /_test/headers HTTP/1.1\r\nHost: a:80:80\r\n\r\n",
        "GET /_test/headers HTTP/1.1\r\nHost: user:pw@api.example.com\r\n\r\n",
        "GET /_test/headers HTTP/1.1\r\nHost: api.example.com@evil.example\r\n\r\n",
        "get /_test/headers HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET /_test/headers#frag HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET http://user@a/_test/headers HTTP/1.1\r\nHost: a\r\n\r\n"}) {
    EXPECT_EQ(Status(head), 400U) << head;
  }
  EXPECT_EQ(Status("GET /_test/headers HTTP/1.1\r\nHost: a:8080\r\n\r\n"), 200U);
  EXPECT_EQ(Status("GET /_test/headers HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n"), 200U);
}

TEST_F(RequestHead, MalformedHeadsAre400OverHttp2) {
  const std::string out = HeadPeer("malformed_heads", gateway_->port());
  for (const std::string name : {"userinfo", "at_host", "double_port", "lowercase_method",
                                 "ftp_scheme", "fragment"}) {
    EXPECT_NE(out.find(name + "=400\n"), std::string::npos) << name << ":\n" << out;
  }
  EXPECT_NE(out.find("good=200\n"), std::string::npos) << out;
}

// The fields the upstream saw, from /_test/headers's JSON.
boost::json::object Seen(const std::string& json) { return boost::json::parse(json).as_object(); }

// An HTTP/2 client's trailers reach the upstream (in the last chunk of an
// HTTP/1.1 upstream's request) without a field that identity, forwarding,
// routing, framing or authentication read or set.
TEST_F(RequestHead, Http2TrailersCannotForgeWhatTheHeaderDecided) {
  const std::string out = HeadPeer("trailers", gateway_->port());
  ASSERT_NE(out.find("status=200\n"), std::string::npos) << out;
  const std::size_t at = out.find("seen=");
  ASSERT_NE(at, std::string::npos) << out;
  const std::string json = out.substr(at + 5, out.find('\n', at) - at - 5);
  EXPECT_EQ(json.find("forged"), std::string::npos) << json;
  const boost::json::object seen = Seen(json);
  ASSERT_TRUE(seen.contains("x-checksum")) << json;
  EXPECT_EQ(seen.at("x-checksum").as_string(), "kept");
}

// An HTTP/1.1 client's trailers are not forwarded at all, and
// HTTP2-Settings is a connection's own whether Connection names it or not.
TEST_F(RequestHead, Http1TrailersAndHttp2SettingsStayBehind) {
  Client client(gateway_->port());
  client.Send(
      "POST /_test/headers HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
      "HTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n"
      "5\r\nhello\r\n0\r\nX-User-Id: forged\r\nAuthorization: forged\r\nX-Checksum: forged\r\n\r\n");
  const Response res = client.Read();
  ASSERT_EQ(res.result_int(), 200U);
  EXPECT_EQ(res.body().find("forged"), std::string::npos) << res.body();
  const boost::json::object seen = Seen(res.body());
  EXPECT_FALSE(seen.contains("HTTP2-Settings")) << res.body();
  EXPECT_FALSE(seen.contains("http2-settings")) << res.body();
}

}  // namespace
}  // namespace tollgate::testing
