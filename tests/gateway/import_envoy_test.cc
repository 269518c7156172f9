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

namespace tollgate::gateway {
namespace {

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

std::string Toml(const std::string& yaml) {
  ImportResult result = ImportEnvoyRatelimit(yaml, "config.yaml");
  EXPECT_FALSE(result.error) << result.error->line << ": " << result.error->message;
  return result.toml;
}

// The produced rules, loaded as tollgate would load them.
rules::Config Load(const std::string& toml) {
  rules::LoadResult r = rules::LoadConfigText(std::string(kBase) + toml, "t.toml");
  for (const rules::ConfigError& e : r.errors) ADD_FAILURE() << e.ToString() << "\n" << toml;
  return r.config ? std::move(*r.config) : rules::Config{};
}

// "line: message" of the import's error.
std::string Error(const std::string& yaml) {
  ImportResult result = ImportEnvoyRatelimit(yaml, "config.yaml");
  if (!result.error) return "no error; got:\n" + result.toml;
  return std::to_string(result.error->line) + ": " + result.error->message;
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
)");
  const rules::Config config = Load(toml);
  ASSERT_EQ(config.rules.size(), 4u);
  const std::int64_t windows_ms[] = {1000, 60'000, 3'600'000, 86'400'000};
  const std::int64_t limits[] = {1, 2, 3, 4'000'000};
  for (std::size_t i = 0; i < 4; ++i) {
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

TEST(ImportEnvoy, ErrorsNameTheirLine) {
  EXPECT_EQ(Error(R"(domain: d
descriptors:
  - key: a
    rate_limit:
      unit: fortnight
      requests_per_unit: 3
)"),
            "5: unknown unit \"fortnight\": second, minute, hour or day");
  EXPECT_EQ(Error(R"(domain: d
descriptors:
  - key: a
    rate_limit:
      unit: second
)"),
            "5: rate_limit needs \"requests_per_unit\"");
  EXPECT_EQ(Error("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: [\n"),
            "5: end of sequence flow not found");
  EXPECT_EQ(Error("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: day, "
                  "requests_per_unit: -1}\n"),
            "4: \"requests_per_unit\" must be an integer from 1 to 4294967295; got \"-1\"");
  EXPECT_EQ(Error("domain: d\ndescriptors:\n  - key: a\n    value: pre*\n"),
            "4: value \"pre*\" is a prefix match; tollgate matches a value exactly or any value "
            "(\"*\")");
  EXPECT_EQ(Error("domain: d\ndescriptors:\n  - key: a\n    value: x\n  - key: a\n"),
            "5: key \"a\" has entries both with and without a value at one level: "
            "envoyproxy/ratelimit takes the one with the value, tollgate would apply both");
  EXPECT_EQ(Error("domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      replaces:\n"
                  "        - name: x\n"),
            "5: \"replaces\" has no tollgate equivalent: every matching rule applies");
  // Beyond what the loader takes (the printed TOML must load).
  const std::string too_large = Error(
      "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: day\n"
      "      requests_per_unit: 4294967295\n");
  EXPECT_TRUE(too_large.starts_with("6: limit 4294967295 ")) << too_large;
  EXPECT_EQ(Error("descriptors: []\n"), "1: \"domain\" is required");
  EXPECT_EQ(Error(""), "1: the configuration must be a mapping with \"domain\"");
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

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

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
  broken.replace(broken.find("limit = 5\n"), 10, "limit = 0\n");
  dir.Write("broken.toml", std::string(kBase) + "\n" + broken);
  const CommandRun refused = RunIn(dir, kBinary + " --check-config broken.toml");
  EXPECT_EQ(refused.code, 1);
  EXPECT_TRUE(refused.err.find("broken.toml:") != std::string::npos) << refused.err;
  EXPECT_TRUE(refused.err.find("limit") != std::string::npos) << refused.err;
}

// What cannot be translated: exit 1, nothing on stdout, FILE:LINE: message
// on stderr (the docs' week unit at line 21; malformed YAML at its
// line); a file that cannot be read, and a wrong command line.
TEST(ImportEnvoyCli, ErrorsExitOneWithFileAndLine) {
  const testing::TempDir dir;
  std::string week = kReadmeYaml;
  week.replace(week.find("unit: hour"), 10, "unit: week");
  dir.Write("config.yaml", week);
  const CommandRun unit = RunIn(dir, kBinary + " import envoy-ratelimit config.yaml");
  EXPECT_EQ(unit.code, 1);
  EXPECT_EQ(unit.out, "");
  EXPECT_EQ(unit.err, "config.yaml:21: unknown unit \"week\": second, minute, hour or day\n");
  dir.Write("bad.yaml", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: [\n");
  const CommandRun malformed = RunIn(dir, kBinary + " import envoy-ratelimit " + dir.path() + "/bad.yaml");
  EXPECT_EQ(malformed.code, 1);
  EXPECT_EQ(malformed.out, "");
  EXPECT_EQ(malformed.err, dir.path() + "/bad.yaml:5: end of sequence flow not found\n");
  const CommandRun missing = RunIn(dir, kBinary + " import envoy-ratelimit missing.yaml");
  EXPECT_EQ(missing.code, 1);
  EXPECT_EQ(missing.err, "tollgate: cannot read missing.yaml\n");
  const CommandRun usage = RunIn(dir, kBinary + " import other config.yaml");
  EXPECT_NE(usage.code, 0);
  EXPECT_EQ(usage.out, "");
}

}  // namespace
}  // namespace tollgate::gateway
