// Rules for Envoy RLS descriptors: match.domain and
// match.descriptor, the key part "descriptor", the separation between RLS
// rules and HTTP rules, and the configuration errors of these keys and of
// [decision], each with its file:line:col.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config_text.h"
#include "rules/config.h"
#include "rules/rule_set.h"

namespace tollgate::rules {
namespace {

class NoHeaders final : public HeaderLookup {
 public:
  std::string_view Get(std::string_view) const override { return {}; }
  std::string GetJoined(std::string_view) const override { return {}; }
};

Config Load(const std::string& rules) {
  LoadResult r = LoadConfigText(std::string(kMinimal) + rules, "t.toml");
  for (const ConfigError& e : r.errors) ADD_FAILURE() << e.ToString();
  return r.config ? std::move(*r.config) : Config{};
}

std::vector<std::string> Errors(const std::string& text) {
  LoadResult r = LoadConfigText(std::string(kMinimal) + text, "t.toml");
  std::vector<std::string> out;
  for (const ConfigError& e : r.errors) out.push_back(e.ToString());
  EXPECT_EQ(r.config.has_value(), out.empty());
  return out;
}

// The facts of one RLS descriptor of `domain`.
RequestFacts Descriptor(std::string_view domain, const std::vector<DescriptorEntry>& entries,
                        const HeaderLookup& headers) {
  RequestFacts facts;
  facts.peer = *IpAddress::Parse("127.0.0.1");
  facts.headers = &headers;
  facts.descriptor_call = true;
  facts.domain = domain;
  facts.descriptor = entries;
  return facts;
}

// "rule:shown key" of every rate rule that applies, in file order.
std::string Hits(const RuleSet& rules, const RequestFacts& facts) {
  Identity id;
  id.client_ip = facts.peer;
  Evaluation evaluation;
  rules.Evaluate(facts, id, evaluation);
  std::string out;
  for (const RuleHit& hit : evaluation.hits) {
    if (!out.empty()) out += ' ';
    out += hit.rule->name + ":" + DisplayKey(*hit.rule, hit.key);
  }
  return out;
}

constexpr const char* kRules = R"(
[[rules]]
name = "login"
match = { domain = "edge", descriptor = { remote_address = "*", path = "/login" } }
key = "descriptor"
algorithm = "fixed_window"
limit = 5
window = "1m"
[[rules]]
name = "edge-any"
match = { domain = "edge" }
key = "descriptor"
algorithm = "fixed_window"
limit = 100
window = "1m"
[[rules]]
name = "tenant"
match = { descriptor = { tenant = "*" } }
key = ["descriptor", "global"]
algorithm = "fixed_window"
limit = 10
window = "1s"
[[rules]]
name = "http"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
)";

TEST(Descriptors, DomainAndEntriesMatchInAnyOrder) {
  const Config config = Load(kRules);
  const RuleSet rules(config.rules);
  const NoHeaders h;
  const std::vector<DescriptorEntry> login = {{"remote_address", "10.0.0.1"}, {"path", "/login"}};
  // The key follows the rule's descriptor (sorted by key), not the order
  // the entries came in; "edge-any" has no descriptor and keys them as
  // they came.
  EXPECT_EQ(Hits(rules, Descriptor("edge", login, h)),
            "login:descriptor=path=/login,remote_address=10.0.0.1 "
            "edge-any:descriptor=remote_address=10.0.0.1,path=/login");
  const std::vector<DescriptorEntry> reversed = {{"path", "/login"}, {"remote_address", "10.0.0.1"}};
  EXPECT_EQ(Hits(rules, Descriptor("edge", reversed, h)),
            "login:descriptor=path=/login,remote_address=10.0.0.1 "
            "edge-any:descriptor=path=/login,remote_address=10.0.0.1");
  // Another domain: only the rule without a domain can match, and its
  // descriptor differs.
  EXPECT_EQ(Hits(rules, Descriptor("other", login, h)), "");
}

TEST(Descriptors, ValuesMustEqualUnlessStar) {
  const Config config = Load(kRules);
  const RuleSet rules(config.rules);
  const NoHeaders h;
  const std::vector<DescriptorEntry> other_path = {{"remote_address", "10.0.0.1"},
                                                   {"path", "/logout"}};
  EXPECT_EQ(Hits(rules, Descriptor("edge", other_path, h)),
            "edge-any:descriptor=remote_address=10.0.0.1,path=/logout");
  // "*" takes any value, the empty one too.
  const std::vector<DescriptorEntry> tenant = {{"tenant", ""}};
  EXPECT_EQ(Hits(rules, Descriptor("anything", tenant, h)), "tenant:descriptor=tenant= global=*");
}

TEST(Descriptors, EntriesMustBeExactlyTheRulesKeys) {
  const Config config = Load(kRules);
  const RuleSet rules(config.rules);
  const NoHeaders h;
  // One entry more than the rule names.
  const std::vector<DescriptorEntry> more = {
      {"remote_address", "10.0.0.1"}, {"path", "/login"}, {"user", "bob"}};
  EXPECT_EQ(Hits(rules, Descriptor("edge", more, h)),
            "edge-any:descriptor=remote_address=10.0.0.1,path=/login,user=bob");
  // One fewer.
  const std::vector<DescriptorEntry> fewer = {{"path", "/login"}};
  EXPECT_EQ(Hits(rules, Descriptor("edge", fewer, h)), "edge-any:descriptor=path=/login");
  // As many, but one of them repeated in place of one the rule names.
  const std::vector<DescriptorEntry> repeated = {{"path", "/login"}, {"path", "/login"}};
  EXPECT_EQ(Hits(rules, Descriptor("edge", repeated, h)),
            "edge-any:descriptor=path=/login,path=/login");
  const std::vector<DescriptorEntry> tenant_and_more = {{"tenant", "a"}, {"plan", "free"}};
  EXPECT_EQ(Hits(rules, Descriptor("x", tenant_and_more, h)), "");
}

// Rules with domain/descriptor decide RLS descriptors only, the others
// HTTP requests only.
TEST(Descriptors, RlsAndHttpRulesAreSeparate) {
  const Config config = Load(kRules);
  const RuleSet rules(config.rules);
  const NoHeaders h;
  RequestFacts http;
  http.method = "GET";
  http.path = "/login";
  http.host = "h";
  http.route = "/";
  http.peer = *IpAddress::Parse("192.0.2.1");
  http.headers = &h;
  EXPECT_EQ(Hits(rules, http), "http:ip=192.0.2.1");
  const std::vector<DescriptorEntry> tenant = {{"tenant", "a"}};
  EXPECT_EQ(Hits(rules, Descriptor("edge", tenant, h)),
            "edge-any:descriptor=tenant=a tenant:descriptor=tenant=a global=*");
}

// A descriptor's key is unambiguous whatever bytes its entries hold: an
// entry whose value holds the separators does not share the key of two
// entries.
TEST(Descriptors, KeysOfDifferentDescriptorsDiffer) {
  const Config config = Load(kRules);
  const RuleSet rules(config.rules);
  const RuleConfig& edge_any = config.rules[1];
  const NoHeaders h;
  Identity id;
  const auto key = [&](const std::vector<DescriptorEntry>& entries) {
    std::string k;
    EXPECT_TRUE(BuildKey(edge_any, Descriptor("edge", entries, h), id, k));
    return k;
  };
  const std::string two = key({{"a", "1"}, {"b", "2"}});
  EXPECT_NE(two, key({{"a", "1\x1e"
                            "b=2"}}));
  EXPECT_NE(two, key({{"a=1\x1e"
                       "b",
                       "2"}}));
  EXPECT_NE(key({{"a", "1\x1f"}, {"b", "2"}}), key({{"a", "1"}, {"\x1f"
                                                                 "b",
                                                                 "2"}}));
  EXPECT_NE(key({{"a", "b=c"}}), key({{"a=b", "c"}}));
  // Long descriptors are bounded like any key part.
  const std::string long_value(200, 'v');
  const std::string bounded = key({{"a", long_value}});
  EXPECT_LT(bounded.size(), edge_any.name.size() + 1 + kMaxKeyPart + 1);
  EXPECT_NE(bounded, key({{"a", long_value + "w"}}));
}

TEST(Descriptors, ConfigErrorsArePlaced) {
  const std::vector<std::string> errors = Errors(R"(
[[rules]]
name = "a"
match = { domain = "", path_prefix = "/x" }
key = "descriptor"
algorithm = "fixed_window"
limit = 1
window = "1s"
[[rules]]
name = "b"
match = { descriptor = {} }
key = "descriptor"
algorithm = "fixed_window"
limit = 1
window = "1s"
[[rules]]
name = "c"
match = { domain = "edge", descriptor = { k = 1 } }
key = ["descriptor", "ip"]
algorithm = "fixed_window"
limit = 1
window = "1s"
[[rules]]
name = "d"
key = "descriptor"
algorithm = "fixed_window"
limit = 1
window = "1s"
[[rules]]
name = "e"
match = { domain = "edge" }
key = "descriptor"
max_inflight = 2
[[rules]]
name = "f"
match = { descriptor = "k" }
key = "global"
algorithm = "fixed_window"
limit = 1
window = "1s"
)");
  const std::vector<std::string> expected = {
      R"(t.toml:11:20: "domain" must not be empty)",
      R"(t.toml:11:38: "path_prefix" has no meaning next to "domain"/"descriptor": such a rule decides Envoy RLS descriptors, not HTTP requests)",
      R"(t.toml:18:24: "descriptor" must be a table of entries { key = "value" } ("*" takes any value); got an empty table)",
      R"(t.toml:25:47: "k" must be a string; got an integer)",
      R"(t.toml:26:7: key part "ip" has no meaning in a rule with "domain"/"descriptor": use "descriptor" or "global")",
      R"(t.toml:32:7: key part "descriptor" needs match.domain or match.descriptor: only Envoy RLS calls have descriptors)",
      R"(t.toml:40:16: "max_inflight" has no meaning in a rule with "domain"/"descriptor")",
      R"(t.toml:43:24: "descriptor" must be a table of entries { key = "value" } ("*" takes any value); got a string)",
  };
  EXPECT_EQ(errors, expected);
}

TEST(Decision, Keys) {
  EXPECT_FALSE(Load("").decision.has_value());
  const Config config = Load(R"(
[decision]
address = "127.0.0.1:8081"
deny_status = 403
)");
  ASSERT_TRUE(config.decision.has_value());
  EXPECT_EQ(config.decision->listener.address.ToString(), "127.0.0.1:8081");
  EXPECT_FALSE(config.decision->listener.tls());
  EXPECT_EQ(config.decision->deny_status, 403u);
  EXPECT_EQ(Load("[decision]\naddress = \"127.0.0.1:8081\"\n").decision->deny_status, 0u);
}

// [decision] allow: the clients' networks; an empty list is a mistake.
TEST(Decision, Allow) {
  const Config config =
      Load("[decision]\naddress = \"127.0.0.1:8081\"\nallow = [\"10.0.0.0/8\", \"::1\"]\n");
  ASSERT_EQ(config.decision->allow.size(), 2u);
  EXPECT_TRUE(config.decision->allow[0].Contains(*IpAddress::Parse("10.1.2.3")));
  EXPECT_FALSE(config.decision->allow[0].Contains(*IpAddress::Parse("11.1.2.3")));
  EXPECT_TRUE(config.decision->allow[1].Contains(*IpAddress::Parse("::1")));
  EXPECT_EQ(
      Errors("[decision]\naddress = \"127.0.0.1:8081\"\nallow = [\"nowhere\"]\n"),
      std::vector<std::string>{
          R"(t.toml:10:10: "allow" must list CIDRs such as "10.0.0.0/8" or "::1/128": "nowhere" is not an IP address or network such as "203.0.113.0/24" or "2001:db8::/32")"});
  EXPECT_EQ(Errors("[decision]\naddress = \"127.0.0.1:8081\"\nallow = []\n"),
            std::vector<std::string>{
                R"(t.toml:10:9: "allow" lists no network: leave it out to accept any address)"});
}

// { not = [...] }: any value but these (what `tollgate import
// envoy-ratelimit` makes of an entry without a value next to entries with
// values); limit = 0 refuses every request.
TEST(Descriptors, AnyValueButSome) {
  const Config config = Load(R"(
[[rules]]
name = "per-ip"
match = { domain = "edge", descriptor = { remote_address = { not = ["50.0.0.5", "50.0.0.9"] } } }
key = "descriptor"
algorithm = "fixed_window"
limit = 10
window = "1s"
[[rules]]
name = "black"
match = { domain = "edge", descriptor = { remote_address = "50.0.0.5" } }
key = "descriptor"
algorithm = "fixed_window"
limit = 0
window = "1s"
)");
  const RuleSet rules(config.rules);
  const NoHeaders h;
  const std::vector<DescriptorEntry> listed = {{"remote_address", "50.0.0.5"}};
  const std::vector<DescriptorEntry> other = {{"remote_address", "50.0.0.1"}};
  const std::vector<DescriptorEntry> unlisted_too = {{"remote_address", "50.0.0.9"}};
  EXPECT_EQ(Hits(rules, Descriptor("edge", listed, h)), "black:descriptor=remote_address=50.0.0.5");
  EXPECT_EQ(Hits(rules, Descriptor("edge", other, h)), "per-ip:descriptor=remote_address=50.0.0.1");
  EXPECT_EQ(Hits(rules, Descriptor("edge", unlisted_too, h)), "");
  EXPECT_EQ(config.rules[1].limit->windows[0].limit, 0);
  const std::vector<std::string> errors = Errors(R"(
[[rules]]
name = "a"
match = { domain = "edge", descriptor = { k = { not = [] } } }
key = "descriptor"
algorithm = "fixed_window"
limit = 1
window = "1s"
[[rules]]
name = "b"
match = { domain = "edge", descriptor = { k = "*" } }
key = "descriptor"
algorithm = "token_bucket"
limit = 0
window = "1s"
[[rules]]
name = "c"
match = { domain = "edge", descriptor = { k = "*" } }
key = "descriptor"
algorithm = "fixed_window"
limit = 0
window = "1s"
action = "delay"
max_delay = "1s"
)");
  const std::vector<std::string> expected = {
      R"(t.toml:11:47: "k" must be a value, "*" or { not = ["value", ...] })",
      R"(t.toml:21:9: limit must be at least 1, got 0)",
      R"(t.toml:28:9: limit = 0 refuses every request: it takes neither sync = "lease" nor action = "delay")",
  };
  EXPECT_EQ(errors, expected);
}

TEST(Decision, ErrorsArePlaced) {
  const std::vector<std::string> errors = Errors(R"(
[decision]
deny_status = 200
tls = { cert = "/nonexistent/cert.pem" }
colour = "blue"
)");
  const std::vector<std::string> expected = {
      R"(t.toml:9:1: missing required key "address")",
      R"(t.toml:10:15: "deny_status" must be between 400 and 599; got 200)",
      R"(t.toml:11:7: missing required key "key")",
      R"(t.toml:12:10: unknown key "colour")",
  };
  EXPECT_EQ(errors, expected);
  EXPECT_EQ(Errors("[decision]\naddress = \"nowhere\"\n"),
            std::vector<std::string>{
                R"(t.toml:9:11: "address" must be an address "host:port"; got "nowhere")"});
}

}  // namespace
}  // namespace tollgate::rules
