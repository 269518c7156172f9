// The proxy's header rules on Beast fields: hop-by-hop fields never pass,
// X-Forwarded-* are tollgate's own, whatever the case a client wrote, and a
// Host holds only what a host and port may.
#include "gateway/core/http_util.h"
#include "gateway/io/wire_header.h"

#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "rules/identity.h"

namespace tollgate::gateway {
namespace {

using Lines = std::vector<std::pair<std::string, std::string>>;

Fields Make(const Lines& lines) {
  Fields fields;
  for (const auto& [name, value] : lines) fields.insert(name, value);
  return fields;
}

// In the order they would be written.
Lines Written(const Fields& fields) {
  Lines out;
  for (const auto& f : fields) out.emplace_back(f.name_string(), f.value());
  return out;
}

TEST(HopByHop, EveryHopByHopFieldGoesWhateverItsCaseAndTheRestKeepsItsOrder) {
  Fields fields = Make({{"Server", "s"},
                        {"connection", "keep-alive"},
                        {"KEEP-ALIVE", "timeout=5"},
                        {"Proxy-Connection", "keep-alive"},
                        {"TE", "trailers"},
                        {"Trailer", "X-Sum"},
                        {"Transfer-Encoding", "chunked"},
                        {"Upgrade", "h2c"},
                        {"Proxy-Authenticate", "Basic"},
                        {"Proxy-Authorization", "Basic eDp5"},
                        {"Content-Type", "text/plain"},
                        {"X-Kept", "1"}});
  RemoveHopByHop(fields);
  EXPECT_EQ(Written(fields),
            (Lines{{"Server", "s"}, {"Content-Type", "text/plain"}, {"X-Kept", "1"}}));
}

TEST(HopByHop, NamesListedInConnectionGoTooButNeverTheFraming) {
  Fields fields = Make({{"Connection", "X-Hop-A, content-length"},
                        {"X-Hop-A", "1"},
                        {"Content-Length", "5"},
                        {"x-hop-b", "2"},
                        {"Connection", "X-HOP-B, Host"},
                        {"Host", "h"},
                        {"X-Kept", "3"}});
  RemoveHopByHop(fields);
  EXPECT_EQ(Written(fields), (Lines{{"Content-Length", "5"}, {"Host", "h"}, {"X-Kept", "3"}}));
}

TEST(HopByHop, AMessageWithoutAnyIsUnchanged) {
  const Lines lines{{"Host", "h"}, {"Accept", "*/*"}, {"X-A", "1"}, {"X-A", "2"}};
  Fields fields = Make(lines);
  RemoveHopByHop(fields);
  EXPECT_EQ(Written(fields), lines);
}

TEST(Forwarded, TheChainJoinsEveryLineAndEndsWithTheClient) {
  Fields fields = Make({{"x-forwarded-for", "198.51.100.1"},
                        {"Host", "api.example.com"},
                        {"X-Forwarded-For", "203.0.113.7, 10.0.0.1"},
                        {"Accept", "*/*"}});
  PrepareForwardedRequest(fields, "127.0.0.1", Scheme::kHttps);
  EXPECT_EQ(Written(fields),
            (Lines{{"Host", "api.example.com"},
                   {"Accept", "*/*"},
                   {"X-Forwarded-For", "198.51.100.1, 203.0.113.7, 10.0.0.1, 127.0.0.1"},
                   {"X-Forwarded-Proto", "https"},
                   {"X-Forwarded-Host", "api.example.com"},
                   {"X-Real-IP", "127.0.0.1"}}));
}

TEST(Forwarded, AClientsProtoAndHostNeverReachTheUpstream) {
  Fields fields = Make({{"x-forwarded-proto", "https"},
                        {"X-FORWARDED-HOST", "evil.example"},
                        {"Host", "h1"},
                        {"Host", "h2"}});
  PrepareForwardedRequest(fields, "::1", Scheme::kHttp);
  EXPECT_EQ(Written(fields), (Lines{{"Host", "h1"},
                                    {"Host", "h2"},
                                    {"X-Forwarded-For", "::1"},
                                    {"X-Forwarded-Proto", "http"},
                                    {"X-Forwarded-Host", "h1"},
                                    {"X-Real-IP", "::1"}}));
}

TEST(Forwarded, HopByHopFieldsAndExpectGo) {
  Fields fields = Make({{"Connection", "X-Hop"},
                        {"X-Hop", "1"},
                        {"Expect", "100-continue"},
                        {"Host", "h"},
                        {"TE", "trailers"}});
  PrepareForwardedRequest(fields, "10.1.2.3", Scheme::kHttp);
  EXPECT_EQ(Written(fields), (Lines{{"Host", "h"},
                                    {"X-Forwarded-For", "10.1.2.3"},
                                    {"X-Forwarded-Proto", "http"},
                                    {"X-Forwarded-Host", "h"},
                                    {"X-Real-IP", "10.1.2.3"}}));
}

TEST(Forwarded, NoHostMeansNoForwardedHost) {
  Fields fields = Make({{"X-Forwarded-Host", "claimed"}});
  PrepareForwardedRequest(fields, "10.1.2.3", Scheme::kHttp);
  EXPECT_EQ(Written(fields), (Lines{{"X-Forwarded-For", "10.1.2.3"},
                                    {"X-Forwarded-Proto", "http"},
                                    {"X-Real-IP", "10.1.2.3"}}));
}

// CGI servers read X_Forwarded_For as X-Forwarded-For: no spelling of the
// fields tollgate sets passes but its own.
TEST(Forwarded, OtherSpellingsOfTollgatesFieldsGo) {
  Fields fields = Make({{"X_Forwarded_For", "6.6.6.1"},
                        {"x-forwarded_proto", "https"},
                        {"X_FORWARDED_HOST", "evil.example"},
                        {"X_Real_IP", "6.6.6.2"},
                        {"Host", "h"}});
  PrepareForwardedRequest(fields, "10.1.2.3", Scheme::kHttp);
  EXPECT_EQ(Written(fields), (Lines{{"Host", "h"},
                                    {"X-Forwarded-For", "10.1.2.3"},
                                    {"X-Forwarded-Proto", "http"},
                                    {"X-Forwarded-Host", "h"},
                                    {"X-Real-IP", "10.1.2.3"}}));
}

// Forwarded (RFC 7239) comes only from trusted proxies (ScrubIdentityFields
// removes the others'): tollgate appends its element, the peer quoted when
// it is IPv6, the host when it is not a token.
TEST(Forwarded, ATrustedChainGetsTollgatesElement) {
  Fields fields = Make({{"Forwarded", "for=192.0.2.60;proto=http"},
                        {"Host", "api.example:8080"},
                        {"forwarded", "for=\"[2001:db8::1]\""}});
  PrepareForwardedRequest(fields, "::1", Scheme::kHttps);
  EXPECT_EQ(Written(fields), (Lines{{"Host", "api.example:8080"},
                                    {"X-Forwarded-For", "::1"},
                                    {"X-Forwarded-Proto", "https"},
                                    {"X-Forwarded-Host", "api.example:8080"},
                                    {"X-Real-IP", "::1"},
                                    {"Forwarded",
                                     "for=192.0.2.60;proto=http, for=\"[2001:db8::1]\", "
                                     "for=\"[::1]\";proto=https;host=\"api.example:8080\""}}));
  Fields plain = Make({{"Forwarded", "for=192.0.2.60"}, {"Host", "api.example"}});
  PrepareForwardedRequest(plain, "10.0.0.1", Scheme::kHttp);
  EXPECT_EQ(plain["Forwarded"], "for=192.0.2.60, for=10.0.0.1;proto=http;host=api.example");
  Fields no_host = Make({{"Forwarded", "for=192.0.2.60"}});
  PrepareForwardedRequest(no_host, "10.0.0.1", Scheme::kHttp);
  EXPECT_EQ(no_host["Forwarded"], "for=192.0.2.60, for=10.0.0.1;proto=http");
}

// PrepareForwardedLines writes what PrepareForwardedRequest inserts: the
// same wire header, whatever the request brought (a chain, a trusted
// X-Real-IP, Forwarded, no Host).
TEST(Forwarded, LinesAreTheFieldsAsTheUpstreamReadsThem) {
  const std::vector<Lines> requests{
      {{"Host", "api.example.com"}, {"X-Forwarded-For", "203.0.113.7"}, {"Accept", "*/*"}},
      {{"X-Real-IP", "198.51.100.9"}, {"Host", "h"}, {"Connection", "X-Hop"}, {"X-Hop", "1"}},
      {{"Forwarded", "for=192.0.2.60"}, {"Host", "api.example:8080"}, {"Expect", "100-continue"}},
      {{"X-Forwarded-Host", "claimed"}, {"User-Agent", "t"}},
  };
  for (const Lines& lines : requests) {
    for (const Scheme scheme : {Scheme::kHttp, Scheme::kHttps}) {
      http::request_header<Fields> inserted;
      inserted.method(http::verb::get);
      inserted.target("/a?b");
      inserted.version(11);
      for (const auto& [name, value] : lines) inserted.insert(name, value);
      http::request_header<Fields> appended = inserted;
      PrepareForwardedRequest(inserted, "2001:db8::7", scheme);
      std::string extra;
      PrepareForwardedLines(appended, "2001:db8::7", scheme, extra);
      std::string want;
      std::string got;
      AppendWireHeader(inserted, want);
      AppendWireHeader(appended, got, extra);
      EXPECT_EQ(got, want);
    }
  }
}

rules::IdentityConfig IdentityHeaders() {
  rules::IdentityConfig config;
  config.user_header = "X-User-Id";
  config.role_header = "X-User-Role";
  return config;
}

// A peer that is not a trusted proxy tells the upstream nothing of who sends
// the request: no spelling of the identity headers (CGI servers read
// X_User_Id as X-User-Id), nor of X-Real-IP (PrepareForwardedRequest sets
// it), True-Client-IP or Forwarded.
TEST(IdentityFields, NothingOfAPeerThatIsNotTrusted) {
  Fields fields = Make({{"X-User-Id", "a"},
                        {"Host", "h"},
                        {"x_user_id", "b"},
                        {"X-USER_ROLE", "admin"},
                        {"X-Real-IP", "6.6.6.1"},
                        {"x_real-ip", "6.6.6.2"},
                        {"True-Client-IP", "6.6.6.3"},
                        {"True_Client_Ip", "6.6.6.4"},
                        {"Forwarded", "for=6.6.6.5"},
                        {"FORWARDED", "for=6.6.6.6"},
                        {"X-User-Ids", "kept"},
                        {"X-Kept", "1"}});
  rules::Identity stranger;
  stranger.client_ip = *rules::IpAddress::Parse("203.0.113.9");
  ScrubIdentityFields(fields, IdentityHeaders(), stranger);
  EXPECT_EQ(Written(fields), (Lines{{"Host", "h"}, {"X-User-Ids", "kept"}, {"X-Kept", "1"}}));
  PrepareForwardedRequest(fields, "203.0.113.9", Scheme::kHttp);
  EXPECT_EQ(fields["X-Real-IP"], "203.0.113.9");
  EXPECT_EQ(fields.count("Forwarded"), 0u);
}

// From a trusted proxy its fields stay in their configured spelling (in any
// case), and X-Real-IP is the client tollgate found in X-Forwarded-For.
TEST(IdentityFields, ATrustedProxysStayButOnlyInTheirOwnSpelling) {
  Fields fields = Make({{"x-user-id", "alice"},
                        {"X_User_Id", "mallory"},
                        {"X-User-Role", "user"},
                        {"X_User_Role", "admin"},
                        {"X-Real-IP", "10.9.9.9"},
                        {"X_Real_IP", "6.6.6.1"},
                        {"True-Client-IP", "198.51.100.7"},
                        {"True_Client_IP", "6.6.6.2"},
                        {"Forwarded", "for=198.51.100.7"},
                        {"Host", "h"}});
  rules::Identity proxied;
  proxied.peer_trusted = true;
  proxied.client_ip = *rules::IpAddress::Parse("2001:db8::7");
  ScrubIdentityFields(fields, IdentityHeaders(), proxied);
  EXPECT_EQ(Written(fields), (Lines{{"x-user-id", "alice"},
                                    {"X-User-Role", "user"},
                                    {"True-Client-IP", "198.51.100.7"},
                                    {"Forwarded", "for=198.51.100.7"},
                                    {"Host", "h"},
                                    {"X-Real-IP", "2001:db8::7"}}));
  // "Connection: X-Real-IP" from the proxy does not remove tollgate's own.
  fields.insert("Connection", "X-Real-IP");
  PrepareForwardedRequest(fields, "10.0.0.1", Scheme::kHttp);
  EXPECT_EQ(fields["X-Real-IP"], "2001:db8::7");
  EXPECT_EQ(fields["Forwarded"], "for=198.51.100.7, for=10.0.0.1;proto=http;host=h");
  // A client a proxy named with something that is no address: that text.
  Fields unknown = Make({{"X-Real-IP", "10.9.9.9"}});
  rules::Identity unidentified;
  unidentified.peer_trusted = true;
  unidentified.unidentified_client = "unknown";
  ScrubIdentityFields(unknown, IdentityHeaders(), unidentified);
  EXPECT_EQ(Written(unknown), (Lines{{"X-Real-IP", "unknown"}}));
}

TEST(WireHeader, RequestAndResponseAreWrittenFieldByFieldInOrder) {
  http::request_header<Fields> req;
  req.method(http::verb::post);
  req.target("/a?b=c");
  req.version(11);
  req.insert("Host", "api.example");
  req.insert("X-Empty", "");
  req.insert("Accept", "text/plain");
  req.insert("accept", "text/html");
  std::string out = "(before)";
  AppendWireHeader(req, out);
  EXPECT_EQ(out,
            "(before)POST /a?b=c HTTP/1.1\r\nHost: api.example\r\nX-Empty: \r\n"
            "Accept: text/plain\r\naccept: text/html\r\n\r\n");

  http::response_header<Fields> res;
  res.result(http::status::not_found);
  res.version(10);
  res.insert("Content-Length", "0");
  res.insert("Server", std::string(300, 's'));
  std::string wire;
  AppendWireHeader(res, wire, "RateLimit: x\r\n");
  EXPECT_EQ(wire, "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\nServer: " +
                      std::string(300, 's') + "\r\nRateLimit: x\r\n\r\n");
  std::string bare;
  AppendWireHeader(http::response_header<Fields>(), bare);
  EXPECT_EQ(bare, "HTTP/1.1 200 OK\r\n\r\n");
}

// uri-host [":" port] of RFC 3986: unreserved, sub-delims, '%' (of
// percent-encoding), ':' (the port) and the brackets of an IP-literal.
bool InHostSyntax(unsigned char c) {
  return std::isalnum(c) != 0 ||
         std::string_view("-._~%!$&'()*+,;=:[]").find(static_cast<char>(c)) !=
             std::string_view::npos;
}

// The problem CheckRequestHeader finds with a Host field of `host`.
std::string HostProblem(const std::string& host) {
  http::request_header<Fields> header;
  header.version(11);
  header.method(http::verb::get);
  header.target("/");
  header.insert(http::field::host, host);
  return std::string(CheckRequestHeader(header, false).problem);
}

// Every byte outside uri-host [":" port] is refused; of those inside it,
// ':', '%' and the brackets only in their places (a port of digits after
// one ':', an escape of two hex digits, an IP-literal), so "a:b", "a%b",
// "a[b" and "a]b" are refused as well.
TEST(RequestHeader, AHostMayHoldOnlyTheBytesOfUriHostAndPort) {
  for (int c = 1; c < 256; ++c) {
    const bool in_place =
        std::string_view(":%[]").find(static_cast<char>(c)) == std::string_view::npos;
    EXPECT_EQ(HostProblem("a" + std::string(1, static_cast<char>(c)) + "b").empty(),
              InHostSyntax(static_cast<unsigned char>(c)) && in_place)
        << "byte " << c;
  }
  for (const std::string host : {"a:80", "a:", "[::1]:8080", "[::1]", "a%41b", "127.0.0.1:1"}) {
    EXPECT_EQ(HostProblem(host), "") << host;
  }
  for (const std::string host : {"a:80:80", "a:8o", "[::1", "a%4", "::1:80"}) {
    EXPECT_EQ(HostProblem(host), "the Host field is not a valid host") << host;
  }
}

// Absolute-form stands for its origin-form, with the authority as Host. A
// port followed by anything but '/', '?' or the end is refused, not split
// into a port and a path without its '/' (Boost.URL 1.81 takes
// "http://a:80x/y" for port 80 and path "x/y"; found by fuzz/request_head.cc).
TEST(RequestHeader, AbsoluteFormPathBeginsWithASlash) {
  auto check = [](std::string_view target) {
    http::request_header<Fields> header;
    header.version(11);
    header.method(http::verb::get);
    header.target(target);
    header.insert(http::field::host, "ignored.example");
    const RequestHeaderCheck c = CheckRequestHeader(header, false);
    return std::make_tuple(std::string(c.problem), c.authority, c.origin_form);
  };
  EXPECT_EQ(check("http://a.example:80/x?y=1"), std::make_tuple("", "a.example:80", "/x?y=1"));
  EXPECT_EQ(check("https://a.example?q"), std::make_tuple("", "a.example", "/?q"));
  for (std::string_view bad :
       {"http://a:80x/y", "http://a:x", "http://a.example:80st61pi/./x", "https://[::1]:80x/"}) {
    EXPECT_EQ(std::get<0>(check(bad)), "the request target must be a path or an http(s) URL")
        << bad;
  }
}

}  // namespace
}  // namespace tollgate::gateway
