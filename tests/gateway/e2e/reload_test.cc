// Configuration reload: atomic swap, counters of unchanged rules kept,
// broken files refused; and dry_run rules.
#include <gtest/gtest.h>

#include "rules/config.h"
#include "test_support.h"

namespace tollgate::testing {
namespace {

std::string WithRules(const std::string& rules) { return BasicConfig(rules); }

constexpr const char* kRulesA = R"(
[[rules]]
name = "kept"
match = { path_prefix = "/x" }
key = "ip"
algorithm = "fixed_window"
limit = 3
window = "1m"
[[rules]]
name = "changed"
match = { path_prefix = "/changed" }
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1m"
)";

std::shared_ptr<const rules::Config> Parse(const std::string& toml, std::uint16_t echo_port) {
  rules::LoadResult r = rules::LoadConfigText(WithEchoPort(toml, echo_port), "reload.toml");
  for (const auto& e : r.errors) ADD_FAILURE() << e.ToString();
  return std::make_shared<const rules::Config>(*r.config);
}

TEST(Reload, UnchangedRulesKeepTheirCountersChangedOnesStartAfresh) {
  auto echo = StartEcho();
  TestGateway gateway(WithRules(kRulesA), echo->port());
  Client client(gateway.port());
  // The fixed windows are aligned to the clock (1000 s): 20 s are left.
  EXPECT_EQ(client.Get("/changed")["RateLimit"], "\"changed\";r=0;t=20");
  EXPECT_EQ(client.Get("/x")["RateLimit"], "\"kept\";r=2;t=20");
  EXPECT_EQ(client.Get("/x")["RateLimit"], "\"kept\";r=1;t=20");

  std::string b = WithRules(kRulesA);
  b.replace(b.find("limit = 1\n"), 10, "limit = 5\n");
  std::string error;
  ASSERT_TRUE(gateway.server().Reload(Parse(b, echo->port()), error)) << error;
  // The same keep-alive connection gets the new configuration on its next
  // request: "kept" goes on counting, "changed" starts afresh with its new limit.
  EXPECT_EQ(client.Get("/x")["RateLimit"], "\"kept\";r=0;t=20");
  EXPECT_EQ(client.Get("/x").result_int(), 429);
  EXPECT_EQ(client.Get("/changed")["RateLimit"], "\"changed\";r=4;t=20");
}

TEST(Reload, ListenerChangesAreRefusedAndTheOldConfigurationStays) {
  auto echo = StartEcho();
  TestGateway gateway(WithRules(kRulesA), echo->port());
  std::string b = WithRules(kRulesA);
  b.replace(b.find("address = \"127.0.0.1:0\""), 23,
            "address = \"127.0.0.1:0\"\n[[listeners]]\naddress = \"127.0.0.1:0\"");
  std::string error;
  EXPECT_FALSE(gateway.server().Reload(Parse(b, echo->port()), error));
  EXPECT_NE(error.find("restart"), std::string::npos) << error;
  Client client(gateway.port());
  EXPECT_EQ(client.Get("/x")["RateLimit"], "\"kept\";r=2;t=20");
}

TEST(Reload, StoreChangesAreRefused) {
  auto echo = StartEcho();
  TestGateway gateway(WithRules(kRulesA), echo->port());
  const std::string changed = WithRules("[store]\nmax_keys = 5\n" + std::string(kRulesA));
  std::string error;
  EXPECT_FALSE(gateway.server().Reload(Parse(changed, echo->port()), error));
  EXPECT_NE(error.find("[store] changed"), std::string::npos) << error;
}

TEST(DryRun, CountsButForwards) {
  auto echo = StartEcho();
  TestGateway gateway(WithRules(R"(
[[rules]]
name = "shadow"
key = "ip"
algorithm = "fixed_window"
limit = 2
window = "1m"
action = "dry_run"
)"),
                      echo->port());
  Client client(gateway.port());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(client.Get("/").result_int(), 200);
}

}  // namespace
}  // namespace tollgate::testing
