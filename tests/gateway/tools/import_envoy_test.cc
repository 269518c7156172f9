// `tollgate import envoy-ratelimit`: envoyproxy/ratelimit configurations
// (nested descriptors, every unit, unlimited, shadow_mode, entries without a
// value) become [[rules]] that load next to a [decision] section, and what
// has no translation is an error on its line. ImportEnvoyCli runs the real
// binary (TOLLGATE_BINARY) on files the test writes: docs/decision-service.md's example,
// its output through `tollgate --check-config`, and the error path.
#include "gateway/tools/import_envoy.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "algorithms/limit.h"
#include "rules/config.h"
#include "tests/gateway/test_support.h"
#include "tests/support/files.h"

namespace tollgate::gateway {
namespace {

using testing::ReadFile;

constexpr const char* kBase = R"([[listeners]]
address = "127.0.0.1:8080"
[[upstreams]]
name = "api"
servers = ["127.0.0.1:9000"]
[[routes]]
upstream = "api"
[decision]
address = "127.0.0.1:8081"
)";

// "line:column: message" lines.
std::string Lines(const std::vector<ImportMessage>& messages) {
  std::string out;
  for (const ImportMessage& m : messages) {
    out += std::to_string(m.line) + ":" + std::to_string(m.column) + ": " + m.message + "\n";
  }
  return out;
}

std::string Toml(const std::string& yaml) {
  ImportResult result = ImportEnvoyRatelimit(yaml, "config.yaml");
  EXPECT_EQ(Lines(result.errors), "");
  return result.toml;
}

// The produced rules, loaded as tollgate would load them.
rules::Config Load(const std::string& toml) {
  rules::LoadResult r = rules::LoadConfigText(std::string(kBase) + toml, "t.toml");
  for (const rules::ConfigError& e : r.errors) ADD_FAILURE() << e.ToString() << "\n" << toml;
  return r.config ? std::move(*r.config) : rules::Config{};
}

// The import's errors, "line:column: message" each.
std::string Error(const std::string& yaml) {
  ImportResult result = ImportEnvoyRatelimit(yaml, "config.yaml");
  if (result.errors.empty()) return "no error; got:\n" + result.toml;
  return Lines(result.errors);
}

TEST(ImportEnvoy, NestedDescriptorsGiveOneRulePerPathWithALimit) {
  const std::string toml = Toml(R"(domain: edge
descriptors:
  - key: remote_address
    rate_limit:
      unit: minute
      requests_per_unit: 100
    descriptors:
      - key: path
        value: /login
        rate_limit:
          unit: second
          requests_per_unit: 5
      - key: path
        value: /search
        descriptors:
          - key: tenant
            value: "a b"
            rate_limit:
              unit: hour
              requests_per_unit: 7
)");
  EXPECT_EQ(toml, R"(# From config.yaml (envoyproxy/ratelimit) by tollgate import envoy-ratelimit.

[[rules]]
name = "edge/remote_address"
match = { domain = "edge", descriptor = { remote_address = "*" } }
key = "descriptor"
algorithm = "fixed_window"
limit = 100
window = "1m"

[[rules]]
name = "edge/remote_address/path=%2Flogin"
match = { domain = "edge", descriptor = { remote_address = "*", path = "/login" } }
key = "descriptor"
algorithm = "fixed_window"
limit = 5
window = "1s"

[[rules]]
name = "edge/remote_address/path=%2Fsearch/tenant=a b"
match = { domain = "edge", descriptor = { remote_address = "*", path = "/search", tenant = "a b" } }
key = "descriptor"
algorithm = "fixed_window"
limit = 7
window = "1h"
)");
  const rules::Config config = Load(toml);
  ASSERT_EQ(config.rules.size(), 3u);
  const rules::RuleConfig& login = config.rules[1];
  EXPECT_EQ(login.match.domain, "edge");
  ASSERT_EQ(login.match.descriptor.size(), 2u);
  ASSERT_TRUE(login.limit);
  ASSERT_EQ(login.limit->windows.size(), 1u);
  EXPECT_EQ(login.limit->windows[0].algorithm, algorithms::Algorithm::kFixedWindow);
  EXPECT_EQ(login.limit->windows[0].limit, 5);
  EXPECT_EQ(login.limit->windows[0].window_ms, 1000);
}

TEST(ImportEnvoy, EveryUnitInAnyCase) {
  const std::string toml = Toml(R"(domain: units
descriptors:
  - {key: k, value: s, rate_limit: {unit: second, requests_per_unit: 1}}
  - {key: k, value: m, rate_limit: {unit: MINUTE, requests_per_unit: 2}}
  - {key: k, value: h, rate_limit: {unit: Hour, requests_per_unit: 3}}
  - {key: k, value: d, rate_limit: {unit: day, requests_per_unit: 4000000}}
  - {key: k, value: w, rate_limit: {unit: week, requests_per_unit: 5}}
  - {key: k, value: mo, rate_limit: {unit: Month, requests_per_unit: 6}}
  - {key: k, value: y, rate_limit: {unit: YEAR, requests_per_unit: 7}}
)");
  const rules::Config config = Load(toml);
  ASSERT_EQ(config.rules.size(), 7u);
  const std::int64_t windows_ms[] = {1000,        60'000,          3'600'000,       86'400'000,
                                     604'800'000, 2'592'000'000LL, 31'536'000'000LL};
  const std::int64_t limits[] = {1, 2, 3, 4'000'000, 5, 6, 7};
  for (std::size_t i = 0; i < 7; ++i) {
    ASSERT_TRUE(config.rules[i].limit) << i;
    EXPECT_EQ(config.rules[i].limit->windows[0].window_ms, windows_ms[i]) << i;
    EXPECT_EQ(config.rules[i].limit->windows[0].limit, limits[i]) << i;
  }
}

TEST(ImportEnvoy, UnlimitedIsExemptAndShadowModeIsDryRun) {
  const std::string toml = Toml(R"(domain: edge
descriptors:
  - key: user
    value: ops
    rate_limit:
      unlimited: true
  - key: user
    value: bob
    shadow_mode: true
    rate_limit:
      unit: minute
      requests_per_unit: 10
)");
  EXPECT_NE(toml.find("name = \"edge/user=ops\"\nmatch = { domain = \"edge\", descriptor = { user "
                      "= \"ops\" } }\nexempt = true\n"),
            std::string::npos)
      << toml;
  const rules::Config config = Load(toml);
  ASSERT_EQ(config.rules.size(), 2u);
  EXPECT_TRUE(config.rules[0].exempt);
  EXPECT_FALSE(config.rules[1].exempt);
  EXPECT_EQ(config.rules[1].action, rules::RuleAction::kDryRun);
}

TEST(ImportEnvoy, EntriesWithoutAValueMatchAnyAndOddTextIsQuoted) {
  const std::string toml = Toml(R"(domain: "weird \"d\""
descriptors:
  - key: "header.x-api-key"
    descriptors:
      - key: plan
        value: "gold\u00e9"
        rate_limit: {unit: second, requests_per_unit: 3}
)");
  EXPECT_NE(toml.find("descriptor = { \"header.x-api-key\" = \"*\", plan = \"gold\xc3\xa9\" }"),
            std::string::npos)
      << toml;
  // The name keeps to printable ASCII.
  EXPECT_NE(toml.find("name = \"weird \\\"d\\\"/header.x-api-key/plan=gold%C3%A9\""),
            std::string::npos)
      << toml;
  const rules::Config config = Load(toml);
  ASSERT_EQ(config.rules.size(), 1u);
  EXPECT_EQ(config.rules[0].match.domain, "weird \"d\"");
}

TEST(ImportEnvoy, ALeafWithoutRateLimitLimitsNothing) {
  EXPECT_EQ(Toml("domain: d\ndescriptors:\n  - key: a\n"),
            "# From config.yaml (envoyproxy/ratelimit) by tollgate import envoy-ratelimit.\n");
}

TEST(ImportEnvoy, ErrorsNameTheirLineAndColumn) {
  EXPECT_EQ(Error(R"(domain: d
descriptors:
  - key: a
    rate_limit:
      unit: fortnight
      requests_per_unit: 3
)"),
            "5:13: unknown unit \"fortnight\": second, minute, hour, day, week, month or year\n");
  EXPECT_EQ(Error(R"(domain: d
descriptors:
  - key: a
    rate_limit:
      unit: second
)"),
            "5:7: rate_limit needs \"requests_per_unit\"\n");
  EXPECT_EQ(Error("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: [\n"),
            "5:1: end of sequence flow not found\n");
  EXPECT_EQ(Error("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: day, "
                  "requests_per_unit: -1}\n"),
            "4:48: \"requests_per_unit\" must be an integer from 0 to 4294967295; got \"-1\"\n");
  EXPECT_EQ(Error("domain: d\ndescriptors:\n  - key: a\n    value: pre*\n"),
            "4:12: value \"pre*\" is a prefix match; tollgate matches a value exactly or any "
            "value (\"*\")\n");
  EXPECT_EQ(Error("domain: d\ndescriptors:\n  - key: a\n    value: x\n  - key: a\n    value: x\n"),
            "5:5: descriptor a=x is defined twice at one level\n");
  EXPECT_EQ(Error("domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      replaces:\n"
                  "        - name: x\n"),
            "5:7: \"replaces\" has no tollgate equivalent: every matching rule applies\n"
            "5:7: rate_limit needs \"unit\"\n"
            "5:7: rate_limit needs \"requests_per_unit\"\n");
  // Beyond what the loader takes (the printed TOML must load).
  const std::string too_large = Error(
      "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: year\n"
      "      requests_per_unit: 4294967295\n");
  EXPECT_TRUE(too_large.starts_with("6:26: limit 4294967295 ")) << too_large;
  EXPECT_EQ(Error("descriptors: []\n"), "1:1: \"domain\" is required\n");
  EXPECT_EQ(Error(""), "1:1: the configuration must be a mapping with \"domain\"\n");
}

// Every error of a file is reported, in file order, each with its line and
// column, not only the first; the descriptors without one still translate
// (but no TOML is printed while any error remains: ImportEnvoyCli).
TEST(ImportEnvoy, EveryErrorOfAFile) {
  EXPECT_EQ(Error(R"(domain: d
colour: red
descriptors:
  - key: a
    value: pre*
  - key: b
    rate_limit: {unit: fortnight, requests_per_unit: 1}
  - key: c
    rate_limit: {unit: second, requests_per_unit: many, replaces: [{name: x}]}
  - key: ok
    rate_limit: {unit: second, requests_per_unit: 1}
  - value: orphan
    shade: 3
)"),
            "2:1: unknown field \"colour\": expected domain and descriptors\n"
            "5:12: value \"pre*\" is a prefix match; tollgate matches a value exactly or any "
            "value (\"*\")\n"
            "7:24: unknown unit \"fortnight\": second, minute, hour, day, week, month or year\n"
            "9:51: \"requests_per_unit\" must be an integer from 0 to 4294967295; got \"many\"\n"
            "9:57: \"replaces\" has no tollgate equivalent: every matching rule applies\n"
            "12:5: a descriptor needs \"key\"\n"
            "13:5: unknown descriptor field \"shade\"\n");
}

// envoyproxy/ratelimit's README, example 3 (its black list): an entry with
// a value is taken before the entry of the same key without one, and
// requests_per_unit 0 refuses every request. The entry without a value
// becomes "any value but the listed ones".
TEST(ImportEnvoy, ASpecificValueOverridesTheWildcard) {
  const std::string toml = Toml(R"(domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
  - key: remote_address
    value: 50.0.0.9
    rate_limit:
      unlimited: true
)");
  EXPECT_EQ(toml, R"(# From config.yaml (envoyproxy/ratelimit) by tollgate import envoy-ratelimit.

[[rules]]
name = "edge_proxy_per_ip/remote_address"
match = { domain = "edge_proxy_per_ip", descriptor = { remote_address = { not = ["50.0.0.5", "50.0.0.9"] } } }
key = "descriptor"
algorithm = "fixed_window"
limit = 10
window = "1s"

[[rules]]
name = "edge_proxy_per_ip/remote_address=50.0.0.5"
match = { domain = "edge_proxy_per_ip", descriptor = { remote_address = "50.0.0.5" } }
key = "descriptor"
algorithm = "fixed_window"
limit = 0
window = "1s"

[[rules]]
name = "edge_proxy_per_ip/remote_address=50.0.0.9"
match = { domain = "edge_proxy_per_ip", descriptor = { remote_address = "50.0.0.9" } }
exempt = true
)");
  const rules::Config config = Load(toml);
  ASSERT_EQ(config.rules.size(), 3u);
  ASSERT_EQ(config.rules[0].match.descriptor_except.size(), 1u);
  EXPECT_EQ(config.rules[0].match.descriptor_except[0].second,
            (std::vector<std::string>{"50.0.0.5", "50.0.0.9"}));
  ASSERT_TRUE(config.rules[1].limit);
  EXPECT_EQ(config.rules[1].limit->windows[0].limit, 0);
}

// Nested (the README's messaging example with a specific level above a
// wildcard one): a request descriptor whose first entry has a listed value
// follows that branch only, so the wildcard branch's rules leave that
// value out at that level; shadow_mode is dry_run (each descriptor OK, as
// envoyproxy/ratelimit answers it); name and detailed_metric are left out
// with a warning each.
TEST(ImportEnvoy, NestedOverridesAndWarnings) {
  const ImportResult result = ImportEnvoyRatelimit(R"(domain: messaging
descriptors:
  - key: message_type
    value: marketing
    detailed_metric: true
    descriptors:
      - key: to_number
        shadow_mode: true
        rate_limit:
          name: marketing
          unit: day
          requests_per_unit: 5
  - key: message_type
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 100
  - key: to_number
    value: "2061234567"
    rate_limit:
      unlimited: true
      requests_per_unit: 7
)",
                                                   "config.yaml");
  EXPECT_EQ(Lines(result.errors), "");
  EXPECT_EQ(Lines(result.warnings),
            "5:5: \"detailed_metric\" is left out: tollgate's metrics count per rule "
            "(tollgate_ratelimit_decisions_total), and the admin API shows the most limited keys\n"
            "10:11: \"name\" is left out: the rule is named after its descriptor path\n"
            "23:26: \"requests_per_unit\" is not read with unlimited\n");
  EXPECT_NE(result.toml.find(
                "name = \"messaging/message_type=marketing/to_number\"\n"
                "match = { domain = \"messaging\", descriptor = { message_type = \"marketing\", "
                "to_number = \"*\" } }\nkey = \"descriptor\"\nalgorithm = \"fixed_window\"\n"
                "limit = 5\nwindow = \"1d\"\naction = \"dry_run\"\n"),
            std::string::npos)
      << result.toml;
  EXPECT_NE(result.toml.find("name = \"messaging/message_type/to_number\"\n"
                             "match = { domain = \"messaging\", descriptor = { message_type = { "
                             "not = [\"marketing\"] }, to_number = \"*\" } }\n"),
            std::string::npos)
      << result.toml;
  EXPECT_EQ(Load(result.toml).rules.size(), 3u);
}

// The real binary: `tollgate import envoy-ratelimit config.yaml` on the
// docs/decision-service.md's example prints its TOML (exit 0, nothing on stderr),
// and that output appended to a configuration with [decision] passes
// `tollgate --check-config`.
constexpr const char* kReadmeYaml = R"yaml(domain: edge
descriptors:
  - key: remote_address
    rate_limit:
      unit: minute
      requests_per_unit: 100
    descriptors:
      - key: path
        value: /login
        rate_limit:
          unit: minute
          requests_per_unit: 5
  - key: user
    value: ops
    rate_limit:
      unlimited: true
  - key: user
    value: bob
    shadow_mode: true
    rate_limit:
      unit: hour
      requests_per_unit: 1000
)yaml";
constexpr const char* kReadmeToml = R"toml(# From config.yaml (envoyproxy/ratelimit) by tollgate import envoy-ratelimit.

[[rules]]
name = "edge/remote_address"
match = { domain = "edge", descriptor = { remote_address = "*" } }
key = "descriptor"
algorithm = "fixed_window"
limit = 100
window = "1m"

[[rules]]
name = "edge/remote_address/path=%2Flogin"
match = { domain = "edge", descriptor = { remote_address = "*", path = "/login" } }
key = "descriptor"
algorithm = "fixed_window"
limit = 5
window = "1m"

[[rules]]
name = "edge/user=ops"
match = { domain = "edge", descriptor = { user = "ops" } }
exempt = true

[[rules]]
name = "edge/user=bob"
match = { domain = "edge", descriptor = { user = "bob" } }
key = "descriptor"
algorithm = "fixed_window"
limit = 1000
window = "1h"
action = "dry_run"
)toml";

struct CommandRun {
  int code = -1;
  std::string out;  // standard output
  std::string err;  // standard error
};

// `command` run in `dir` through the shell, its two outputs apart.
CommandRun RunIn(const testing::TempDir& dir, const std::string& command) {
  CommandRun run;
  std::string ignored;
  // (RunCommand adds its own redirections after the command: a subshell
  // keeps these.)
  run.code = testing::RunCommand(
      "(cd " + dir.path() + " && " + command + " >out.txt 2>err.txt)", "", ignored);
  run.out = ReadFile(dir.path() + "/out.txt");
  run.err = ReadFile(dir.path() + "/err.txt");
  return run;
}

const std::string kBinary = TOLLGATE_BINARY;

TEST(ImportEnvoyCli, TheReadmeExampleBecomesAConfigurationThatChecks) {
  const testing::TempDir dir;
  dir.Write("config.yaml", kReadmeYaml);
  const CommandRun import = RunIn(dir, kBinary + " import envoy-ratelimit config.yaml");
  EXPECT_EQ(import.code, 0) << import.err;
  EXPECT_EQ(import.err, "");
  EXPECT_EQ(import.out, kReadmeToml);
  dir.Write("tollgate.toml", std::string(kBase) + "\n" + import.out);
  const CommandRun check = RunIn(dir, kBinary + " --check-config tollgate.toml");
  EXPECT_EQ(check.code, 0) << check.out << check.err;
  EXPECT_EQ(check.out, "tollgate.toml: ok\n");
  // The same output with a limit broken by hand is refused (exit 1, the
  // file and line), so the check above is not vacuous.
  std::string broken = import.out;
  broken.replace(broken.find("limit = 5\n"), 10, "limit = -1\n");
  dir.Write("broken.toml", std::string(kBase) + "\n" + broken);
  const CommandRun refused = RunIn(dir, kBinary + " --check-config broken.toml");
  EXPECT_EQ(refused.code, 1);
  EXPECT_TRUE(refused.err.find("broken.toml:") != std::string::npos) << refused.err;
  EXPECT_TRUE(refused.err.find("limit") != std::string::npos) << refused.err;
}

// What cannot be translated: exit 1, nothing on stdout, FILE:LINE:COLUMN: message
// on stderr (a unit envoyproxy/ratelimit does not know at line 21;
// malformed YAML at its line); a file that cannot be read, and a wrong
// command line.
TEST(ImportEnvoyCli, ErrorsExitOneWithFileAndLine) {
  const testing::TempDir dir;
  std::string fortnight = kReadmeYaml;
  fortnight.replace(fortnight.find("unit: hour"), 10, "unit: fortnight");
  dir.Write("config.yaml", fortnight);
  const CommandRun unit = RunIn(dir, kBinary + " import envoy-ratelimit config.yaml");
  EXPECT_EQ(unit.code, 1);
  EXPECT_EQ(unit.out, "");
  EXPECT_EQ(unit.err,
            "config.yaml:21:13: unknown unit \"fortnight\": second, minute, hour, day, week, "
            "month or year\n");
  dir.Write("bad.yaml", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: [\n");
  const CommandRun malformed = RunIn(dir, kBinary + " import envoy-ratelimit " + dir.path() + "/bad.yaml");
  EXPECT_EQ(malformed.code, 1);
  EXPECT_EQ(malformed.out, "");
  EXPECT_EQ(malformed.err, dir.path() + "/bad.yaml:5:1: end of sequence flow not found\n");
  const CommandRun missing = RunIn(dir, kBinary + " import envoy-ratelimit missing.yaml");
  EXPECT_EQ(missing.code, 1);
  EXPECT_EQ(missing.err, "tollgate: cannot read missing.yaml\n");
  const CommandRun usage = RunIn(dir, kBinary + " import other config.yaml");
  EXPECT_NE(usage.code, 0);
  EXPECT_EQ(usage.out, "");
}

}  // namespace
}  // namespace tollgate::gateway
