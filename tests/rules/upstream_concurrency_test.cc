// [[upstreams]] concurrency: a number (max_connections' newer name) or
// "adaptive" with its [upstreams.adaptive] parameters.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config_text.h"
#include "rules/config.h"

namespace tollgate::rules {
namespace {

// A configuration whose one upstream has `keys` (lines 3-5 come before them).
std::string WithUpstreamKeys(const std::string& keys) {
  return "[[listeners]]\naddress = \"127.0.0.1:8080\"\n[[upstreams]]\nname = \"api\"\n"
         "servers = [\"127.0.0.1:9000\"]\n" +
         keys + "[[routes]]\nupstream = \"api\"\n";
}

TEST(UpstreamConcurrency, ANumberIsMaxConnections) {
  LoadResult r = LoadConfigText(WithUpstreamKeys("concurrency = 8\n"), "t.toml");
  ASSERT_TRUE(r.config) << r.errors[0].ToString();
  EXPECT_EQ(r.config->upstreams[0].max_connections, 8);
  EXPECT_FALSE(r.config->upstreams[0].adaptive);
  LoadResult old = LoadConfigText(WithUpstreamKeys("max_connections = 8\n"), "t.toml");
  ASSERT_TRUE(old.config);
  EXPECT_EQ(old.config->upstreams[0].max_connections, 8);
}

TEST(UpstreamConcurrency, AdaptiveTakesDefaultsAndParameters) {
  LoadResult defaults = LoadConfigText(WithUpstreamKeys("concurrency = \"adaptive\"\n"), "t.toml");
  ASSERT_TRUE(defaults.config) << defaults.errors[0].ToString();
  const UpstreamConfig& d = defaults.config->upstreams[0];
  ASSERT_TRUE(d.adaptive);
  EXPECT_EQ(d.max_connections, 0);
  EXPECT_EQ(d.adaptive->min, 1);
  EXPECT_EQ(d.adaptive->max, 1000);
  EXPECT_EQ(d.adaptive->initial, 16);
  EXPECT_EQ(d.adaptive->target_latency_ms, 0);

  LoadResult r = LoadConfigText(
      WithUpstreamKeys("concurrency = \"adaptive\"\nmax_connections_delay = \"2s\"\n"
                       "adaptive = { min = 4, max = 8, target_latency = \"50ms\", "
                       "tolerance_percent = 20, window = \"1s\", probe_interval = \"0s\" }\n"),
      "t.toml");
  ASSERT_TRUE(r.config) << r.errors[0].ToString();
  const AdaptiveConcurrencyConfig& a = *r.config->upstreams[0].adaptive;
  EXPECT_EQ(a.min, 4);
  EXPECT_EQ(a.max, 8);
  EXPECT_EQ(a.initial, 8);  // the default, within [min, max]
  EXPECT_EQ(a.target_latency_ms, 50);
  EXPECT_EQ(a.tolerance_percent, 20);
  EXPECT_EQ(a.window_ms, 1000);
  EXPECT_EQ(a.probe_interval_ms, 0);
  EXPECT_EQ(r.config->upstreams[0].max_connections_delay_ms, 2000);
}

TEST(UpstreamConcurrency, BadValuesArePlaced) {
  EXPECT_EQ(
      Errors(WithUpstreamKeys("concurrency = \"adaptve\"\n")),
      std::vector<std::string>{
          "t.toml:6:15: \"concurrency\" must be an integer or \"adaptive\"; got \"adaptve\""});
  EXPECT_EQ(Errors(WithUpstreamKeys("concurrency = 1.5\n")),
            std::vector<std::string>{
                "t.toml:6:15: \"concurrency\" must be an integer or \"adaptive\"; got a float"});
  EXPECT_EQ(Errors(WithUpstreamKeys("concurrency = 0\n")),
            std::vector<std::string>{
                "t.toml:6:15: \"concurrency\" must be between 1 and 10000000; got 0"});
  EXPECT_EQ(Errors(WithUpstreamKeys("concurrency = 4\nmax_connections = 4\n")),
            std::vector<std::string>{"t.toml:7:19: \"max_connections\" is the older name of "
                                     "\"concurrency\": give one of them"});
  EXPECT_EQ(Errors(WithUpstreamKeys("concurrency = 4\nadaptive = { min = 2 }\n")),
            std::vector<std::string>{"t.toml:7:12: \"adaptive\" needs concurrency = \"adaptive\""});
  EXPECT_EQ(Errors(WithUpstreamKeys("concurrency = \"adaptive\"\n"
                                    "adaptive = { min = 9, max = 3 }\n")),
            std::vector<std::string>{"t.toml:7:20: \"min\" (9) is above \"max\" (3)"});
  EXPECT_EQ(Errors(WithUpstreamKeys("concurrency = \"adaptive\"\n"
                                    "adaptive = { max = 10, initial = 50 }\n")),
            std::vector<std::string>{
                "t.toml:7:34: \"initial\" must be between min (1) and max (10); got 50"});
  EXPECT_EQ(Errors(WithUpstreamKeys("concurrency = \"adaptive\"\n"
                                    "adaptive = { window = \"0s\", mni = 1 }\n")),
            (std::vector<std::string>{"t.toml:7:23: \"window\" must be at least 1ms; got 0ms",
                                      "t.toml:7:35: unknown key \"mni\""}));
}

}  // namespace
}  // namespace tollgate::rules
