// The binary's command line (TOLLGATE_BINARY): each subcommand's help, one
// line per usage error, an unreadable configuration file, and the startup
// log's addresses.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "test_support.h"

namespace tollgate::testing {
namespace {

const std::string kBinary = TOLLGATE_BINARY;

// Runs the binary with `args`; its exit code, with stdout and stderr in `out`
// (RunCommand appends: `out` is emptied first).
int Tollgate(const std::string& args, std::string& out) {
  out.clear();
  return RunCommand(kBinary + " " + args + " 2>&1", "", out);
}

TEST(Cli, SubcommandHelp) {
  std::string help;
  std::string flag;
  for (const std::string sub : {"replay", "import", "echo-upstream", "schema", "ctl"}) {
    ASSERT_EQ(Tollgate("help " + sub, help), 0) << help;
    EXPECT_NE(help.find("tollgate " + sub), std::string::npos) << help;
    ASSERT_EQ(Tollgate(sub + " --help", flag), 0) << flag;
    EXPECT_EQ(flag, help);
  }
  EXPECT_NE(help.find("override set"), std::string::npos) << help;  // ctl's
  ASSERT_EQ(Tollgate("help replay", help), 0);
  EXPECT_NE(help.find("--lease-max"), std::string::npos) << help;
  EXPECT_EQ(help.find("echo-upstream"), std::string::npos) << help;  // that one only
  ASSERT_EQ(Tollgate("help", help), 0);
  ASSERT_EQ(Tollgate("--help", flag), 0);
  EXPECT_EQ(flag, help);
  EXPECT_NE(help.find("tollgate help SUBCOMMAND"), std::string::npos) << help;
}

TEST(Cli, UsageErrorIsOneLine) {
  const struct {
    std::string args;
    std::string line;
  } cases[] = {
      {"--foo", "tollgate: unknown option --foo; see 'tollgate --help'\n"},
      {"frob", "tollgate: unknown command \"frob\"; see 'tollgate --help'\n"},
      {"", "tollgate: nothing to do; see 'tollgate --help'\n"},
      {"help frob", "tollgate: no help for \"frob\"; see 'tollgate --help'\n"},
      {"--config", "tollgate: --config takes one FILE; see 'tollgate --help'\n"},
      {"replay --foo 1",
       "tollgate replay: unknown option --foo; see 'tollgate replay --help'\n"},
      {"replay --limit x",
       "tollgate replay: --limit must be an integer; got \"x\"; see 'tollgate replay --help'\n"},
      {"import nope",
       "tollgate import: import takes envoy-ratelimit FILE; see 'tollgate import --help'\n"},
      {"echo-upstream --foo",
       "tollgate echo-upstream: unknown option --foo; see 'tollgate echo-upstream --help'\n"},
      {"schema x", "tollgate schema: unexpected argument \"x\"; see 'tollgate schema --help'\n"},
      {"ctl --foo", "tollgate ctl: unknown option --foo; see 'tollgate ctl --help'\n"},
      {"ctl", "tollgate ctl: a command is needed; see 'tollgate ctl --help'\n"},
  };
  for (const auto& c : cases) {
    std::string out;
    EXPECT_EQ(Tollgate(c.args, out), 2) << c.args;
    EXPECT_EQ(out, c.line) << c.args;
  }
}

TEST(Cli, MissingConfigurationFile) {
  for (const std::string flag : {"--config", "--check-config"}) {
    std::string out;
    EXPECT_EQ(Tollgate(flag + " nope.toml", out), 1) << flag;
    EXPECT_EQ(out, "tollgate: cannot read nope.toml: No such file or directory\n") << flag;
  }
}

// Every listener's address with tls or plain, the admin's and the decision
// service's, on the line after "serving on port(s)".
TEST(Cli, StartupLogNamesAddresses) {
  auto echo = StartEcho();
  TempDir dir;
  const std::string file = dir.Write(
      "tollgate.toml",
      WithEchoPort(BasicConfig("[decision]\naddress = \"127.0.0.1:0\"\n"), echo->port()));
  Process gateway({kBinary, "--config", file});
  const auto [port, admin] = WaitForPorts(gateway);
  const std::string line = gateway.StderrLine();
  const std::regex addresses(
      "listening on 127\\.0\\.0\\.1:(\\d+) \\(plain\\); admin on 127\\.0\\.0\\.1:(\\d+); "
      "decision on 127\\.0\\.0\\.1:(\\d+) \\(plain\\)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(line, m, addresses)) << line;
  EXPECT_EQ(m[1].str(), std::to_string(port));
  EXPECT_EQ(m[2].str(), std::to_string(admin));
  EXPECT_NE(m[3].str(), "0");
}

}  // namespace
}  // namespace tollgate::testing
