#include "rules/config.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "config_text.h"
#include "rules/duration.h"
#include "rules/route_table.h"

namespace tollgate::rules {
namespace {

TEST(Config, MinimalFileGetsDefaults) {
  LoadResult r = LoadConfigText(kMinimal, "t.toml");
  ASSERT_TRUE(r.config) << (r.errors.empty() ? "" : r.errors[0].ToString());
  const Config& c = *r.config;
  EXPECT_EQ(c.server.threads, 0);
  EXPECT_EQ(c.server.drain_timeout_ms, 10'000);
  EXPECT_EQ(c.admin.address.ToString(), "127.0.0.1:9090");
  EXPECT_EQ(c.timeouts.client_header_ms, 10'000);
  EXPECT_EQ(c.limits.max_body_bytes, 10'485'760);
  EXPECT_EQ(c.routes[0].path_prefix, "/");
  EXPECT_EQ(c.routes[0].name, "/");
  EXPECT_EQ(c.upstreams[0].fail_timeout_ms, 10'000);
}

TEST(Config, Http2Keys) {
  LoadResult defaults = LoadConfigText(kMinimal, "t.toml");
  ASSERT_TRUE(defaults.config);
  EXPECT_TRUE(defaults.config->listeners[0].http2);
  EXPECT_EQ(defaults.config->limits.max_concurrent_streams, 128);
  LoadResult set = LoadConfigText(std::string(kMinimal) + R"([[listeners]]
address = "127.0.0.1:8081"
http2 = false
[limits]
max_concurrent_streams = 16
)",
                                  "t.toml");
  ASSERT_TRUE(set.config) << (set.errors.empty() ? "" : set.errors[0].ToString());
  EXPECT_FALSE(set.config->listeners[1].http2);
  EXPECT_EQ(set.config->limits.max_concurrent_streams, 16);
  const std::vector<std::string> errors = Errors(std::string(kMinimal) + R"([[listeners]]
address = "127.0.0.1:8081"
http2 = "yes"
[limits]
max_concurrent_streams = 0
)");
  const std::vector<std::string> expected = {
      R"(t.toml:10:9: "http2" must be true or false; got a string)",
      R"(t.toml:12:26: "max_concurrent_streams" must be between 1 and 100000; got 0)",
  };
  EXPECT_EQ(errors, expected);
}

TEST(Config, TheShippedExampleIsValid) {
  // Relative paths in it (the development certificate that `make build`
  // makes) are relative to the repository root, where `make run` starts.
  std::filesystem::current_path(TOLLGATE_SOURCE_DIR);
  LoadResult r = LoadConfigFile("conf/tollgate.toml");
  for (const ConfigError& e : r.errors) ADD_FAILURE() << e.ToString();
}

TEST(Config, EveryErrorIsReportedWithItsPosition) {
  const std::vector<std::string> errors = Errors(R"([server]
threads = "two"
drain_timeout = "10 seconds"
colour = "blue"
[[listeners]]
address = "localhost"
[timeouts]
upstream_connect = "0ms"
[log]
format = "xml"
[[upstreams]]
name = "api"
servers = ["nowhere"]
[[routes]]
path_prefix = "api"
upstream = "missing"
)");
  const std::vector<std::string> expected = {
      R"(t.toml:2:11: "threads" must be an integer; got a string)",
      R"(t.toml:3:17: "drain_timeout" must be a duration such as "500ms", "1.5s", "1m30s", "1h" or "1d"; got "10 seconds")",
      R"(t.toml:4:10: unknown key "colour")",
      R"(t.toml:6:11: "address" must be an address "host:port"; got "localhost")",
      R"(t.toml:8:20: "upstream_connect" must be at least 1ms; got 0ms)",
      R"(t.toml:10:10: "format" must be one of combined, json; got "xml")",
      R"(t.toml:13:12: upstream server must be "host:port"; got "nowhere")",
      R"(t.toml:15:15: "path_prefix" must start with "/"; got "api")",
      R"(t.toml:16:12: no [[upstreams]] is named "missing")",
  };
  EXPECT_EQ(errors, expected);
}

// An address named twice (listeners, decision service, admin API) is an
// error at the second naming; port 0 is a new port each time.
TEST(Config, EveryListeningAddressIsNamedOnce) {
  const std::vector<std::string> errors = Errors(std::string(kMinimal) + R"([[listeners]]
address = "127.0.0.1:8080"
[[listeners]]
address = "127.0.0.1:0"
[[listeners]]
address = "127.0.0.1:0"
[decision]
address = "[::1]:8081"
[admin]
address = "[::1]:8081"
)");
  const std::vector<std::string> expected = {
      "t.toml:9:11: address 127.0.0.1:8080 is already used at line 2: every listener, the "
      "decision service and the admin API need addresses of their own",
      "t.toml:17:11: address [::1]:8081 is already used at line 15: every listener, the "
      "decision service and the admin API need addresses of their own",
  };
  EXPECT_EQ(errors, expected);
}

TEST(Config, NotTablesAreChecked) {
  const std::vector<std::string> errors = Errors(std::string(kMinimal) + R"([[rules]]
name = "a"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
match = { not = {} }
[[rules]]
name = "b"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
match = { not = { role = "x", not = { role = "y" } } }
[[rules]]
name = "c"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
match = { not = "admin" }
[[rules]]
name = "d"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
match = { not = { roles = "admin" } }
)");
  const std::vector<std::string> expected = {
      R"(t.toml:14:17: "not" needs at least one condition)",
      R"(t.toml:21:37: "not" cannot hold another "not")",
      R"(t.toml:28:17: "not" must be a table; got a string)",
      R"(t.toml:35:27: unknown key "roles")",
  };
  EXPECT_EQ(errors, expected);
}

TEST(Config, RuleNamesArePrintableAscii) {
  const std::vector<std::string> errors = Errors(std::string(kMinimal) + R"([[rules]]
name = "caf\u00e9"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
[[rules]]
name = "tab\there"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
[[rules]]
name = "quoted \"fine\" \\ too"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
)");
  const std::vector<std::string> expected = {
      R"(t.toml:9:8: "name" must be printable ASCII: it names the rule in the RateLimit header fields)",
      R"(t.toml:15:8: "name" must be printable ASCII: it names the rule in the RateLimit header fields)",
  };
  EXPECT_EQ(errors, expected);
}

// A string where a list is expected reads as a list of one in most
// places, but `methods` is a list only (as the reference says).
TEST(Config, MethodsIsAList) {
  const std::vector<std::string> errors = Errors(std::string(kMinimal) + R"([[rules]]
name = "a"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
match = { methods = "POST" }
[[rules]]
name = "b"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
match = { methods = ["POST", 1] }
)");
  const std::vector<std::string> expected = {
      R"(t.toml:14:21: "methods" must be an array of strings; got a string: write methods = ["POST"])",
      R"(t.toml:21:30: "methods" must be a string; got an integer)",
  };
  EXPECT_EQ(errors, expected);
}

// Header names that no request can carry (a space, a colon, an HTTP/2
// pseudo-header) would never match: they are errors.
TEST(Config, HeaderNamesAreTokens) {
  const std::vector<std::string> errors = Errors(std::string(kMinimal) + R"([identity]
user_header = "X User"
role_header = ":path"
[[rules]]
name = "a"
key = "header:X A"
algorithm = "fixed_window"
limit = 1
window = "1s"
match = { header = { "X A" = "1", "X-Fine" = "2", ":authority" = "h" } }
)");
  const std::string rule =
      "a header name: letters, digits and !#$%&'*+-.^_`|~, no spaces or colons";
  const std::vector<std::string> expected = {
      "t.toml:9:15: \"user_header\" must be " + rule + "; got \"X User\"",
      "t.toml:10:15: \"role_header\" must be " + rule + "; got \":path\"",
      "t.toml:13:7: the NAME of \"header:NAME\" in \"key\" must be " + rule + "; got \"X A\"",
      "t.toml:17:30: each name in \"header\" must be " + rule + "; got \"X A\"",
      "t.toml:17:66: each name in \"header\" must be " + rule + "; got \":authority\"",
  };
  EXPECT_EQ(errors, expected);
}

TEST(Config, SyntaxErrorHasAPosition) {
  const std::vector<std::string> errors = Errors("[server\nthreads = 1\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].rfind("t.toml:1:", 0), 0u) << errors[0];
}

// Some of toml11's errors say what is wrong only under their caret (found
// by fuzz/config.cc): the message is never empty.
TEST(Config, SyntaxErrorAlwaysSaysWhat) {
  for (const char* text : {"[server]\nvia = ture\n", "[[rules]]\nmatch = { anonymous = trn }\n"}) {
    const std::vector<std::string> errors = Errors(text);
    ASSERT_EQ(errors.size(), 1u) << text;
    EXPECT_EQ(errors[0].rfind("t.toml:2:", 0), 0u) << errors[0];
    EXPECT_TRUE(errors[0].ends_with(": the next token is not a boolean")) << errors[0];
  }
}

TEST(Config, MissingFileIsAnError) {
  LoadResult r = LoadConfigFile("/nonexistent/tollgate.toml");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].ToString(),
            "cannot read /nonexistent/tollgate.toml: No such file or directory");
}

TEST(Config, LargeIntegersDoNotWrap) {
  const std::string text = std::string(kMinimal) + "[server]\nthreads = 5000000000\n";
  const std::vector<std::string> errors = Errors(text);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("between 0 and 256; got 5000000000"), std::string::npos);
}

// The keys of upstream protection, Redis Cluster and file watching.
TEST(Config, ProtectionClusterAndWatchErrorsArePlaced) {
  const std::vector<std::string> errors = Errors(R"([[listeners]]
address = "127.0.0.1:8080"
[[upstreams]]
name = "api"
servers = ["127.0.0.1:9000"]
max_connections_delay = "1s"
[[routes]]
upstream = "api"
[[rules]]
name = "c"
key = "ip"
max_inflight = 2
max_waiting = 5
[store]
kind = "redis"
[store.redis]
url = "redis://127.0.0.1:6379"
nodes = ["127.0.0.1:7000", "redis://127.0.0.1:7001/2", "nope:port"]
inflight_ttl = "soon"
batch = 65
[server]
watch_config = "yes"
)");
  const std::vector<std::string> expected{
      "t.toml:6:25: \"max_connections_delay\" needs concurrency (or max_connections)",
      "t.toml:13:15: \"max_waiting\" needs \"max_delay\"",
      "t.toml:18:9: use either \"url\" (one Redis) or \"nodes\" (Redis Cluster)",
      "t.toml:18:28: Redis Cluster has database 0 only",
      "t.toml:18:56: \"redis://nope:port\": the port must be 1..65535",
      "t.toml:19:16: \"inflight_ttl\" must be a duration such as \"500ms\", \"1.5s\", \"1m30s\", "
      "\"1h\" or \"1d\"; got \"soon\"",
      "t.toml:20:9: \"batch\" must be between 1 and 64; got 65",
      "t.toml:22:16: \"watch_config\" must be true or false; got a string"};
  EXPECT_EQ(errors, expected);
}

TEST(Config, Ipv6PrefixIsOneTo128AndPlaced) {
  LoadResult ok =
      LoadConfigText(std::string(kMinimal) + "[identity]\nipv6_prefix = 56\n", "t.toml");
  ASSERT_TRUE(ok.config) << ok.errors[0].ToString();
  EXPECT_EQ(ok.config->identity.ipv6_prefix, 56);
  LoadResult defaults = LoadConfigText(kMinimal, "t.toml");
  ASSERT_TRUE(defaults.config);
  EXPECT_EQ(defaults.config->identity.ipv6_prefix, 64);
  EXPECT_EQ(
      Errors(std::string(kMinimal) + "[identity]\nipv6_prefix = 0\n"),
      std::vector<std::string>{R"(t.toml:9:15: "ipv6_prefix" must be between 1 and 128; got 0)"});
  EXPECT_EQ(
      Errors(std::string(kMinimal) + "[identity]\nipv6_prefix = 129\n"),
      std::vector<std::string>{R"(t.toml:9:15: "ipv6_prefix" must be between 1 and 128; got 129)"});
  EXPECT_EQ(
      Errors(std::string(kMinimal) + "[identity]\nipv6_prefix = \"/64\"\n"),
      std::vector<std::string>{R"(t.toml:9:15: "ipv6_prefix" must be an integer; got a string)"});
}

// Requests are matched in canonical form (rules/normalize.h): configured
// prefixes and hosts are kept in it too, or they could never match.
TEST(Config, PrefixesAndHostsAreCanonical) {
  LoadResult ok = LoadConfigText(std::string(kMinimal) + R"(host = "API.Example.com."
path_prefix = "/a//b/%7euser/%c3%a9"
[[rules]]
name = "r"
match = { path_prefix = "/x/./y", host = "Limited.example." }
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
)",
                                 "t.toml");
  ASSERT_TRUE(ok.config) << ok.errors[0].ToString();
  EXPECT_EQ(ok.config->routes[0].host, "api.example.com");
  EXPECT_EQ(ok.config->routes[0].path_prefix, "/a/b/~user/%C3%A9");
  EXPECT_EQ(ok.config->rules[0].match.path_prefix, "/x/y");
  EXPECT_EQ(ok.config->rules[0].match.host, "limited.example");
  EXPECT_EQ(Errors(std::string(kMinimal) + "path_prefix = \"/../x\"\n"),
            std::vector<std::string>{
                R"(t.toml:8:15: "path_prefix" "/../x" is not a valid path (a malformed escape, %00 or dot segments above the root))"});
  EXPECT_EQ(Errors(std::string(kMinimal) + "host = \"a..b\"\n"),
            std::vector<std::string>{
                R"(t.toml:8:8: "host" "a..b" is not a valid host (an empty name or ".."))"});
}

// [[upstreams]] protocol: h2 is over TLS (the upstream's tls settings),
// h2c cleartext; a mismatch is an error at the key.
TEST(Config, UpstreamProtocolMatchesTls) {
  const std::string head = R"([[listeners]]
address = "127.0.0.1:8080"
[[routes]]
upstream = "api"
[[upstreams]]
name = "api"
servers = ["127.0.0.1:9000"]
)";
  LoadResult defaults = LoadConfigText(head, "t.toml");
  ASSERT_TRUE(defaults.config);
  EXPECT_EQ(defaults.config->upstreams[0].protocol, UpstreamProtocol::kHttp1);
  LoadResult h2 = LoadConfigText(head + "protocol = \"h2\"\ntls = { sni = \"api\" }\n", "t.toml");
  ASSERT_TRUE(h2.config) << h2.errors[0].ToString();
  EXPECT_EQ(h2.config->upstreams[0].protocol, UpstreamProtocol::kH2);
  LoadResult h2c = LoadConfigText(head + "protocol = \"h2c\"\n", "t.toml");
  ASSERT_TRUE(h2c.config) << h2c.errors[0].ToString();
  EXPECT_EQ(h2c.config->upstreams[0].protocol, UpstreamProtocol::kH2c);
  EXPECT_EQ(Errors(head + "protocol = \"h2\"\n"),
            std::vector<std::string>{
                R"(t.toml:8:12: protocol = "h2" is HTTP/2 over TLS: it needs "tls" (tls = {} for the defaults); cleartext HTTP/2 is "h2c")"});
  EXPECT_EQ(Errors(head + "protocol = \"h2c\"\ntls = {}\n"),
            std::vector<std::string>{
                R"(t.toml:8:12: protocol = "h2c" is cleartext HTTP/2: it takes no "tls"; HTTP/2 over TLS is "h2")"});
  EXPECT_EQ(Errors(head + "protocol = \"http2\"\n"),
            std::vector<std::string>{
                R"(t.toml:8:12: "protocol" must be one of http1, h2, h2c; got "http2")"});
}

TEST(Config, UnreadableCertificateIsNamed) {
  const std::vector<std::string> errors = Errors(R"([[listeners]]
address = "127.0.0.1:8443"
tls = { cert = "/nonexistent/cert.pem", key = "/nonexistent/key.pem" }
[[upstreams]]
name = "api"
servers = ["127.0.0.1:9000"]
[[routes]]
upstream = "api"
)");
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_NE(errors[0].find("cannot read certificate \"/nonexistent/cert.pem\""), std::string::npos);
}

// Every rule of the local store gets its own share of [store] max_keys:
// its own max_keys, or an even part of what those leave.
TEST(Config, RulesShareTheLocalStoresKeys) {
  LoadResult r = LoadConfigText(std::string(kMinimal) + R"([store]
max_keys = 1000
[[rules]]
name = "a"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
[[rules]]
name = "b"
key = "header:X-Key"
algorithm = "fixed_window"
limit = 1
window = "1s"
max_keys = 101
[[rules]]
name = "c"
exempt = true
[[rules]]
name = "d"
key = "ip"
max_inflight = 2
[[rules]]
name = "e"
key = "user"
algorithm = "token_bucket"
limit = 1
window = "1s"
[[rules]]
name = "f"
key = "route"
algorithm = "fixed_window"
limit = 1
window = "1s"
)",
                                "t.toml");
  ASSERT_TRUE(r.config) << r.errors[0].ToString();
  std::vector<std::size_t> shares;
  for (const RuleConfig& rule : r.config->rules) shares.push_back(rule.max_keys);
  // 899 keys left for a, e and f; exempt and concurrency rules keep no key.
  EXPECT_EQ(shares, (std::vector<std::size_t>{300, 101, 0, 0, 300, 299}));

  LoadResult defaults = LoadConfigText(std::string(kMinimal) + R"([[rules]]
name = "a"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
[[rules]]
name = "b"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
[[rules]]
name = "c"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
)",
                                       "t.toml");
  ASSERT_TRUE(defaults.config) << defaults.errors[0].ToString();
  EXPECT_EQ(defaults.config->store.max_keys, 1'000'000u);
  EXPECT_EQ(defaults.config->rules[0].max_keys, 333'334u);
  EXPECT_EQ(defaults.config->rules[1].max_keys, 333'333u);
  EXPECT_EQ(defaults.config->rules[2].max_keys, 333'333u);
}

TEST(Config, RuleMaxKeysErrorsArePlaced) {
  const std::vector<std::string> errors = Errors(std::string(kMinimal) + R"([store]
max_keys = 1000
[[rules]]
name = "a"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
max_keys = 0
[[rules]]
name = "b"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
max_keys = "many"
[[rules]]
name = "c"
exempt = true
max_keys = 5
[[rules]]
name = "d"
key = "ip"
max_inflight = 2
max_keys = 5
[[rules]]
name = "e"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
max_keys = 4294967297
)");
  const std::vector<std::string> expected = {
      R"(t.toml:16:12: "max_keys" must be between 1 and 4294967296; got 0)",
      R"(t.toml:23:12: "max_keys" must be an integer; got a string)",
      R"(t.toml:27:12: "max_keys" has no meaning in an exempt rule)",
      R"(t.toml:32:12: "max_keys" has no meaning with max_inflight (a concurrency rule); put a rate limit in a rule of its own)",
      R"(t.toml:39:12: "max_keys" must be between 1 and 4294967296; got 4294967297)",
  };
  EXPECT_EQ(errors, expected);

  // The rules' own max_keys, and a key at least for each other rule, must
  // fit in [store] max_keys: the rule that goes beyond is named.
  const std::vector<std::string> over = Errors(std::string(kMinimal) + R"([store]
max_keys = 100
[[rules]]
name = "a"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
max_keys = 60
[[rules]]
name = "b"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
[[rules]]
name = "c"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
max_keys = 40
[[rules]]
name = "d"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
max_keys = 1
)");
  const std::vector<std::string> expected_over = {
      "t.toml:29:12: the rules need 101 keys of the local store, more than [store] max_keys "
      "(100): their own max_keys, and one key at least for each rule without one",
  };
  EXPECT_EQ(over, expected_over);

  const std::vector<std::string> too_many = Errors(std::string(kMinimal) + R"([store]
max_keys = 1
[[rules]]
name = "a"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
[[rules]]
name = "b"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
)");
  const std::vector<std::string> expected_too_many = {
      "t.toml:17:8: the rules need 2 keys of the local store, more than [store] max_keys "
      "(1): their own max_keys, and one key at least for each rule without one",
  };
  EXPECT_EQ(too_many, expected_too_many);
}

TEST(Config, MessageRulesAndTheirLimits) {
  LoadResult r = LoadConfigText(std::string(kMinimal) + R"([limits]
max_websocket_message_bytes = 65536
[[rules]]
name = "handshakes"
key = "ip"
algorithm = "fixed_window"
limit = 10
window = "1m"
per = "request"
[[rules]]
name = "messages"
key = "user"
algorithm = "token_bucket"
limit = 20
window = "1s"
per = "message"
action = "delay"
max_delay = "2s"
)",
                                "t.toml");
  ASSERT_TRUE(r.config) << r.errors[0].ToString();
  EXPECT_EQ(r.config->limits.max_websocket_message_bytes, 65536);
  EXPECT_EQ(r.config->rules[0].per, LimitUnit::kRequest);
  EXPECT_EQ(r.config->rules[1].per, LimitUnit::kMessage);
  // Message rules keep keys in the local store like any rate rule.
  EXPECT_GT(r.config->rules[1].max_keys, 0u);

  LoadResult defaults = LoadConfigText(kMinimal, "t.toml");
  ASSERT_TRUE(defaults.config);
  EXPECT_EQ(defaults.config->limits.max_websocket_message_bytes, 1'048'576);

  const std::vector<std::string> errors = Errors(std::string(kMinimal) + R"([limits]
max_websocket_message_bytes = 0
[[rules]]
name = "a"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
per = "frame"
[[rules]]
name = "b"
key = "ip"
max_inflight = 2
per = "message"
[[rules]]
name = "c"
exempt = true
per = "message"
[[rules]]
name = "d"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
per = "message"
status = 503
headers = "none"
[[rules]]
name = "e"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
per = "message"
action = "delay"
max_delay = "1s"
max_waiting = 3
[[rules]]
name = "f"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
per = "message"
max_waiting = 3
)");
  const std::vector<std::string> expected = {
      R"(t.toml:9:31: "max_websocket_message_bytes" must be between 1 and 9223372036854775807; got 0)",
      R"(t.toml:16:7: "per" must be one of request, message; got "frame")",
      R"(t.toml:21:7: per = "message" has no meaning with max_inflight: a concurrency rule counts requests in flight (an open WebSocket tunnel is one))",
      R"(t.toml:25:7: "per" has no meaning in an exempt rule)",
      R"(t.toml:33:10: "status" has no meaning with per = "message": a limited message closes its WebSocket (1008), no response is sent)",
      R"(t.toml:34:11: "headers" has no meaning with per = "message": a limited message closes its WebSocket (1008), no response is sent)",
      R"(t.toml:44:15: "max_waiting" has no meaning with per = "message": a held message waits in its own tunnel)",
      R"(t.toml:52:15: "max_waiting" applies to action = "delay" only)",
  };
  EXPECT_EQ(errors, expected);
}

TEST(Duration, Units) {
  EXPECT_EQ(ParseDurationMs("500ms"), 500);
  EXPECT_EQ(ParseDurationMs("1s"), 1000);
  EXPECT_EQ(ParseDurationMs("2m"), 120'000);
  EXPECT_EQ(ParseDurationMs("1h"), 3'600'000);
  EXPECT_EQ(ParseDurationMs("1d"), 86'400'000);
  EXPECT_EQ(ParseDurationMs("10"), std::nullopt);
  EXPECT_EQ(ParseDurationMs("-1s"), std::nullopt);
  EXPECT_EQ(ParseDurationMs("99999999999999999d"), std::nullopt);
}

// Go's time.ParseDuration forms (what Envoy, Traefik and Go users write),
// rounded to the millisecond.
TEST(Duration, GoForms) {
  EXPECT_EQ(ParseDurationMs("1.5s"), 1500);
  EXPECT_EQ(ParseDurationMs("1m30s"), 90'000);
  EXPECT_EQ(ParseDurationMs("2h45m0.5s"), 9'900'500);
  EXPECT_EQ(ParseDurationMs("1d12h"), 129'600'000);
  EXPECT_EQ(ParseDurationMs(".5s"), 500);
  EXPECT_EQ(ParseDurationMs("1.s"), 1000);
  EXPECT_EQ(ParseDurationMs("0"), 0);
  EXPECT_EQ(ParseDurationMs("0s"), 0);
  EXPECT_EQ(ParseDurationMs("1500us"), 2);
  EXPECT_EQ(ParseDurationMs("1400\u00b5s"), 1);
  EXPECT_EQ(ParseDurationMs("2500\u03bcs"), 3);
  EXPECT_EQ(ParseDurationMs("1000000ns"), 1);
  EXPECT_EQ(ParseDurationMs("0.0001h"), 360);
  EXPECT_EQ(ParseDurationMs("1.0000000000000000000000001s"), 1000);
  for (const char* bad : {"", ".", "s", "1", "1.5", "+1s", "-1s", "1 s", "1S", "1sec", "1s ",
                          "1m30", "1..5s", "ms1"}) {
    EXPECT_EQ(ReadDuration(bad).problem, DurationProblem::kSyntax) << bad;
  }
  // Not zero, but under half a millisecond: would be 0 at the resolution.
  EXPECT_EQ(ReadDuration("400us").problem, DurationProblem::kBelowResolution);
  EXPECT_EQ(ReadDuration("1ns").problem, DurationProblem::kBelowResolution);
}

// Every duration ends somewhere a clock can count to: at most 100 years.
TEST(Duration, TooLongIsRefused) {
  EXPECT_EQ(ParseDurationMs("36500d"), kMaxDurationMs);
  EXPECT_EQ(ParseDurationMs("876000h"), kMaxDurationMs);
  for (const char* huge :
       {"36500d1ms", "36501d", "106751991167d", "9223372036854775807ms", "9223372036854775808ms",
        "99999999999999999999999999999999999d", "36499d24h0.5ms"}) {
    EXPECT_EQ(ReadDuration(huge).problem, DurationProblem::kTooLong) << huge;
  }
  EXPECT_EQ(ParseDurationMs("36499d24h0.4ms"), kMaxDurationMs);
}

TEST(Duration, ConfigErrorsArePlaced) {
  const std::vector<std::string> errors = Errors(std::string(kMinimal) + R"([server]
drain_timeout = "106751991167d"
[timeouts]
client_idle = "9223372036854775807ms"
client_header = "400us"
client_body = "1m30s"
request = "2.5m"
)");
  const std::vector<std::string> expected = {
      R"(t.toml:9:17: "drain_timeout" must be at most "36500d" (100 years); got "106751991167d")",
      R"(t.toml:11:15: "client_idle" must be at most "36500d" (100 years); got "9223372036854775807ms")",
      R"(t.toml:12:17: "client_header" must be 0 or at least 1ms (durations are rounded to the millisecond); got "400us")",
  };
  EXPECT_EQ(errors, expected);
  LoadResult ok = LoadConfigText(std::string(kMinimal) +
                                     "[timeouts]\nclient_body = \"1m30s\"\n"
                                     "request = \"2.5m\"\n",
                                 "t.toml");
  ASSERT_TRUE(ok.config) << ok.errors.front().ToString();
  EXPECT_EQ(ok.config->timeouts.client_body_ms, 90'000);
  EXPECT_EQ(ok.config->timeouts.request_ms, 150'000);
}

TEST(HostPortParsing, V4V6AndErrors) {
  EXPECT_EQ(ParseHostPort("127.0.0.1:80")->ToString(), "127.0.0.1:80");
  EXPECT_EQ(ParseHostPort("[::1]:8080")->host, "::1");
  EXPECT_EQ(ParseHostPort("[::1]:8080")->ToString(), "[::1]:8080");
  EXPECT_FALSE(ParseHostPort("::1:80"));
  EXPECT_FALSE(ParseHostPort("host:70000"));
  EXPECT_FALSE(ParseHostPort("host"));
}

TEST(Routes, HostNamesCompareWithoutPortOrCase) {
  EXPECT_TRUE(SameHostName("API.example.com:8080", "api.example.com"));
  EXPECT_TRUE(SameHostName("api.example.com", "api.example.com:443"));
  EXPECT_TRUE(SameHostName("[::1]:80", "[::1]"));
  EXPECT_FALSE(SameHostName("api.example.co", "api.example.com"));
  EXPECT_FALSE(SameHostName("[::1]", "[::2]"));
  EXPECT_EQ(HostName("[fe80::1]:8080"), "[fe80::1]");
}

TEST(Routes, LongestPrefixAndHost) {
  std::vector<RouteConfig> routes(4);
  routes[0].path_prefix = "/";
  routes[0].upstream = "default";
  routes[1].path_prefix = "/api";
  routes[1].upstream = "api";
  routes[2].path_prefix = "/api";
  routes[2].host = "Special.Example.com";
  routes[2].upstream = "special";
  routes[3].path_prefix = "/api/v2";
  routes[3].upstream = "v2";
  RouteTable table(routes);
  EXPECT_EQ(table.Match("x", "/")->upstream, "default");
  EXPECT_EQ(table.Match("x", "/api/users?q=1")->upstream, "api");
  EXPECT_EQ(table.Match("special.example.com:8080", "/api/users")->upstream, "special");
  EXPECT_EQ(table.Match("special.example.com", "/api/v2/x")->upstream, "v2");
  EXPECT_EQ(table.Match("x", "/apix")->upstream, "api");  // a prefix, as in nginx
  EXPECT_EQ(table.Match("SPECIAL.example.COM", "/api/x")->upstream, "special");
  // The table refers to the configs: they must outlive it.
  const std::vector<RouteConfig> api_only(routes.begin() + 1, routes.begin() + 2);
  RouteTable only_api(api_only);
  EXPECT_EQ(only_api.Match("x", "/other"), nullptr);
}

}  // namespace
}  // namespace tollgate::rules
