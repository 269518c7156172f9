// `tollgate ctl` (gateway/tools/ctl.h), the real binary, against a gateway's
// admin listener: its tables, --json, and exit codes (0; 1 with the
// server's error or an unreachable listener; 2 for a usage error).
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include "admin.h"
#include "test_support.h"

namespace tollgate::testing {
namespace {

constexpr const char* kRules = R"(
[[rules]]
name = "per-key"
key = "header:X-Api-Key"
algorithm = "fixed_window"
limit = 3
window = "1m"
[[rules]]
name = "conn"
key = "ip"
max_inflight = 3
)";

class Ctl : public ::testing::Test {
 protected:
  Ctl() {
    gateway_ = std::make_unique<TestGateway>(WithAdminTokenFile(BasicConfig(kRules), token_),
                                             echo_->port());
  }
  // Runs `tollgate ctl <args>` against the gateway, with the token in the
  // environment unless `token` is false; the exit code, output in `out`.
  int Run(const std::string& args, std::string& out, bool token = true) {
    out.clear();
    return RunCommand(std::string(token ? "TOLLGATE_ADMIN_TOKEN=" + std::string(kAdminToken) + " "
                                        : "env -u TOLLGATE_ADMIN_TOKEN ") +
                          TOLLGATE_BINARY + " ctl --admin http://127.0.0.1:" +
                          std::to_string(gateway_->admin_port()) + " " + args,
                      "", out);
  }

  TempDir dir_;
  std::string token_ = dir_.Write("token", std::string(kAdminToken));
  std::unique_ptr<gateway::EchoUpstream> echo_ = StartEcho();
  std::unique_ptr<TestGateway> gateway_;
};

TEST_F(Ctl, RulesAndKeys) {
  std::string out;
  ASSERT_EQ(Run("rules", out), 0) << out;
  EXPECT_EQ(out,
            "RULE     KEY               LIMITS             ACTION\n"
            "per-key  header:X-Api-Key  3/1m fixed_window  reject\n"
            "conn     ip                max_inflight 3\n");
  Client client(gateway_->port());
  ASSERT_EQ(client.Get("/x", "X-Api-Key: k1\r\n").result_int(), 200);
  ASSERT_EQ(Run("keys --rule per-key --header X-Api-Key=k1", out), 0) << out;
  EXPECT_EQ(out,
            "rule per-key, key header:X-Api-Key=#6ab9f1eb (local store): not limited\n"
            "WINDOW  ALGORITHM     LIMIT  REMAINING  RESET_MS  RETRY_AFTER_MS  STATE\n"
            "1m      fixed_window  3      2          20000     0               count=1\n");
  ASSERT_EQ(Run("--json keys --rule per-key --header X-Api-Key=k1", out), 0) << out;
  EXPECT_EQ(boost::json::parse(out).at("windows").at(0).at("remaining"), 2);
  ASSERT_EQ(Run("reset --rule per-key --header X-Api-Key=k1", out), 0) << out;
  EXPECT_EQ(out, "reset rule per-key key header:X-Api-Key=#6ab9f1eb\n");
  ASSERT_EQ(Run("keys --rule per-key --header X-Api-Key=k1", out), 0) << out;
  EXPECT_NE(out.find("1m      fixed_window  3      3 "), std::string::npos) << out;
}

TEST_F(Ctl, BlocksAndUnblocks) {
  std::string out;
  ASSERT_EQ(Run("block --user mallory --ttl 10m", out), 0) << out;
  EXPECT_EQ(out, "blocked user:mallory for 600 s (status 403)\n");
  ASSERT_EQ(Run("block --ip 203.0.113.0/24 --ttl 1h --status 451", out), 0) << out;
  ASSERT_EQ(Run("blocks", out), 0) << out;
  EXPECT_EQ(out,
            "ID                 STATUS  TTL_S\n"
            "user:mallory       403     600\n"
            "ip:203.0.113.0/24  451     3600\n");
  ASSERT_EQ(Run("unblock --id user:mallory", out), 0) << out;
  EXPECT_EQ(out, "unblocked user:mallory\n");
  EXPECT_EQ(Run("unblock --id user:mallory", out), 1);
  EXPECT_EQ(out, "tollgate ctl: 404 unknown_block: no block with id \"user:mallory\"\n");
}

// What the server sends is shown escaped: a value with an escape sequence
// (here one that would retitle the terminal, one that colours it and a C1
// control) cannot reach the terminal raw.
TEST_F(Ctl, ControlCharactersFromTheServerAreEscaped) {
  std::string out;
  ASSERT_EQ(Run("block --user 'evil\x1b]0;owned\x07red\x1b[31m\xc2\x9bX' --ttl 10m", out), 0)
      << out;
  EXPECT_EQ(out,
            "blocked user:evil\\x1B]0;owned\\x07red\\x1B[31m\\xC2\\x9BX for 600 s (status 403)\n");
  ASSERT_EQ(Run("blocks", out), 0) << out;
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
  EXPECT_NE(out.find("user:evil\\x1B]0;owned\\x07red"), std::string::npos) << out;
  EXPECT_EQ(Run("unblock --id 'user:evil\x1b[2J'", out), 1);
  EXPECT_EQ(out, "tollgate ctl: 404 unknown_block: no block with id \"user:evil\\x1B[2J\"\n");
}

// A blocklist file: one address or network a line, comments and blank
// lines skipped, sent in batches within the admin API's body limit; a bad
// line is named by its number, and the batches before it stay set.
TEST_F(Ctl, BlocksAFileOfAddressesInBatches) {
  std::string list = "# a feed\n\n203.0.113.0/24  # a network\n";
  for (int i = 0; i < 2500; ++i) {
    list += "10.0." + std::to_string(i / 250) + "." + std::to_string(i % 250) + "\n";
  }
  const std::string file = dir_.Write("feed.txt", list);
  std::string out;
  ASSERT_EQ(Run("block --ips-from " + file + " --ttl 1h --status 451", out), 0) << out;
  EXPECT_EQ(out, "blocked 2501 addresses and networks from " + file + " for 3600 s (status 451)\n");
  ASSERT_EQ(Run("--json blocks", out), 0);
  EXPECT_EQ(boost::json::parse(out).at("blocks").as_array().size(), 2501u);
  Client client(gateway_->port());
  EXPECT_EQ(client.Get("/x").result_int(), 200);  // 127.0.0.1 is not in the list

  // Line 2003 is bad: the first batch (more than 1000 blocks) was set.
  std::string bad;
  for (int i = 0; i < 2500; ++i) bad += (i == 2002 ? "10.1.300.1" : "10.1.0." + std::to_string(i % 250)) + std::string("\n");
  const std::string bad_file = dir_.Write("bad.txt", bad);
  EXPECT_EQ(Run("block --ips-from " + bad_file + " --ttl 1h", out), 1);
  EXPECT_NE(out.find("tollgate ctl: 400 bad_request: " + bad_file +
                     ":2003: ip: \"10.1.300.1\" is not an IP"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(" of the 2500 blocks before that one were set"), std::string::npos) << out;

  EXPECT_EQ(Run("block --ips-from " + file + " --user x --ttl 1h", out), 2);
  EXPECT_NE(out.find("--ips-from takes the place of --ip, --user and --header"), std::string::npos);
  EXPECT_EQ(Run("block --ips-from " + dir_.path() + "/none.txt --ttl 1h", out), 2);
  EXPECT_NE(out.find("--ips-from: cannot read "), std::string::npos) << out;
}

TEST_F(Ctl, OverridesSetListAndRemove) {
  std::string out;
  ASSERT_EQ(
      Run("override set --rule per-key --header X-Api-Key=k1 --limit 5 --window 1m --ttl 1h", out),
      0)
      << out;
  EXPECT_EQ(out, "override of rule per-key key header:x-api-key=k1: 5/1m for 3600 s\n");
  Client client(gateway_->port());
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(client.Get("/x", "X-Api-Key: k1\r\n").result_int(), 200) << i;
  }
  EXPECT_EQ(client.Get("/x", "X-Api-Key: k1\r\n").result_int(), 429);
  // A key's state shows the override it is decided by.
  ASSERT_EQ(Run("keys --rule per-key --header X-Api-Key=k1", out), 0) << out;
  EXPECT_EQ(out,
            "rule per-key, key header:X-Api-Key=#6ab9f1eb (local store): limited\n"
            "WINDOW  ALGORITHM     LIMIT  REMAINING  RESET_MS  RETRY_AFTER_MS  STATE\n"
            "1m      fixed_window  5      0          20000     20000           count=5\n"
            "override: 5/1m for 3600 s\n");
  ASSERT_EQ(
      Run("override set --rule per-key --header X-Api-Key=k2 --limit 1 --window 10s --ttl 10m",
          out),
      0)
      << out;
  ASSERT_EQ(Run("override list", out), 0) << out;
  EXPECT_EQ(out,
            "RULE     KEY                  LIMITS  TTL_S  APPLIES\n"
            "per-key  header:x-api-key=k1  5/1m    3600   yes\n"
            "per-key  header:x-api-key=k2  1/10s   600    yes\n");
  ASSERT_EQ(Run("--json override list --rule per-key", out), 0) << out;
  EXPECT_EQ(boost::json::parse(out).at("overrides").as_array().size(), 2u);
  ASSERT_EQ(Run("override list --rule conn", out), 0) << out;
  EXPECT_EQ(out, "RULE  KEY  LIMITS  TTL_S  APPLIES\n");

  ASSERT_EQ(Run("override remove --rule per-key --header X-Api-Key=k1", out), 0) << out;
  EXPECT_EQ(out, "removed the override of rule per-key key header:x-api-key=k1\n");
  EXPECT_EQ(Run("override remove --rule per-key --header X-Api-Key=k1", out), 1);
  EXPECT_EQ(out,
            "tollgate ctl: 404 unknown_override: no override of rule \"per-key\" for this key\n");
  // The key is decided by the rule again, from its state under the rule
  // (3 a minute), which the override left alone.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(client.Get("/x", "X-Api-Key: k1\r\n").result_int(), 200) << i;
  }
  EXPECT_EQ(client.Get("/x", "X-Api-Key: k1\r\n").result_int(), 429);

  // The server's errors: exit 1, nothing changed.
  EXPECT_EQ(
      Run("override set --rule per-key --header X-Api-Key=k3 --limit 0 --window 1m --ttl 1h", out),
      1);
  EXPECT_EQ(out,
            "tollgate ctl: 400 bad_request: limits[0].limit: must be an integer of at least 1\n");
  EXPECT_EQ(Run("override set --rule nope --user x --limit 1 --window 1m --ttl 1h", out), 1);
  EXPECT_EQ(out,
            "tollgate ctl: 404 unknown_rule: no rule named \"nope\"\n"
            "rules: [\"per-key\",\"conn\"]\n");
  EXPECT_EQ(Run("override set --rule per-key --header X-Api-Key=k3 --limit 1 --window 1m --ttl 1h",
                out, false),
            1);
  EXPECT_NE(out.find("tollgate ctl: 401 unauthorized: "), std::string::npos) << out;
  ASSERT_EQ(Run("override list", out), 0) << out;
  EXPECT_EQ(out.find("k3"), std::string::npos) << out;

  // Usage errors: exit 2.
  EXPECT_EQ(Run("override set --rule per-key --header X-Api-Key=k3 --limit 5 --ttl 1h", out), 2);
  EXPECT_NE(out.find("tollgate ctl: every --limit needs its --window"), std::string::npos) << out;
  EXPECT_EQ(Run("override set --rule per-key --header X-Api-Key=k3 --limit many --window 1m "
                "--ttl 1h",
                out),
            2);
  EXPECT_NE(out.find("tollgate ctl: --limit takes a number"), std::string::npos) << out;
  EXPECT_EQ(Run("override set --rule per-key --header X-Api-Key=k3 --ttl 1h", out), 2);
  EXPECT_EQ(Run("override set --rule per-key --header X-Api-Key=k3 --limit 1 --window 1m", out), 2);
  EXPECT_NE(out.find("tollgate ctl: --ttl is required"), std::string::npos) << out;
  EXPECT_EQ(Run("override remove --header X-Api-Key=k2", out), 2);
  EXPECT_EQ(Run("override frobnicate", out), 2);
  EXPECT_NE(out.find("unknown command \"override frobnicate\""), std::string::npos) << out;
  EXPECT_EQ(Run("override", out), 2);
}

TEST_F(Ctl, ExitCodes) {
  std::string out;
  EXPECT_EQ(Run("reset --rule per-key --header X-Api-Key=k1", out, false), 1);
  EXPECT_NE(out.find("tollgate ctl: 401 unauthorized: "), std::string::npos) << out;
  EXPECT_EQ(Run("keys --rule nope --user alice", out), 1);
  EXPECT_EQ(out,
            "tollgate ctl: 404 unknown_rule: no rule named \"nope\"\n"
            "rules: [\"per-key\",\"conn\"]\n");
  EXPECT_EQ(Run("keys --rule per-key --user alice", out), 1);
  EXPECT_NE(out.find("tollgate ctl: 400 bad_request: user: "), std::string::npos) << out;
  EXPECT_EQ(Run("block --user x --ttl soon", out), 1);
  EXPECT_NE(out.find("400 bad_request: ttl: "), std::string::npos) << out;
  EXPECT_EQ(Run("keys --user alice", out), 2);
  EXPECT_NE(out.find("tollgate ctl: --rule is required"), std::string::npos) << out;
  EXPECT_EQ(Run("frobnicate", out), 2);
  EXPECT_EQ(Run("rules --colour red", out), 2);
  out.clear();
  EXPECT_EQ(RunCommand(std::string(TOLLGATE_BINARY) + " ctl --admin http://127.0.0.1:1 rules", "",
                       out),
            1);
  EXPECT_NE(out.find("tollgate ctl: cannot connect to 127.0.0.1:1"), std::string::npos) << out;
}

}  // namespace
}  // namespace tollgate::testing
