// `tollgate replay --upstream-model`: a heavy tenant and light ones into a
// saturated model upstream; what each limit and order does to them, and
// the flags.
#include "gateway/tools/replay_upstream.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

namespace tollgate::gateway {
namespace {

// 60 s of Poisson arrivals: flow 0 at 200/s, flows 1..10 at 4/s each (one
// tenant sends 50 times what each other sends), into an upstream that
// serves 160/s (8 at once, 50 ms each).
void HeavyAndLight(std::vector<std::int64_t>& times, std::vector<std::uint32_t>& flows) {
  std::mt19937_64 random(7);
  std::vector<std::pair<std::int64_t, std::uint32_t>> rows;
  for (std::uint32_t flow = 0; flow <= 10; ++flow) {
    std::exponential_distribution<double> gap((flow == 0 ? 200.0 : 4.0) / 1000.0);
    for (double t = gap(random); t < 60'000; t += gap(random)) {
      rows.emplace_back(static_cast<std::int64_t>(t), flow);
    }
  }
  std::sort(rows.begin(), rows.end());
  for (const auto& [t, flow] : rows) {
    times.push_back(t);
    flows.push_back(flow);
  }
}

const PolicyResult& Find(const std::vector<PolicyResult>& results, const std::string& limit,
                         const std::string& order) {
  for (const PolicyResult& r : results) {
    if (r.limit == limit && r.order == order) return r;
  }
  ADD_FAILURE() << "no row " << limit << " " << order;
  return results.front();
}

TEST(ReplayUpstream, FairOrderShieldsLightTenantsAndAdaptiveFindsTheKnee) {
  std::vector<std::int64_t> times;
  std::vector<std::uint32_t> flows;
  HeavyAndLight(times, flows);
  UpstreamReplayOptions options;
  options.concurrency = 64;  // too high: the upstream's own queue grows
  const std::vector<PolicyResult> results = SimulateUpstream(options, times, flows);
  ASSERT_EQ(results.size(), 5u);
  const PolicyResult& none = Find(results, "none", "-");
  const PolicyResult& fixed_fifo = Find(results, "fixed 64", "first come");
  const PolicyResult& fixed_fair = Find(results, "fixed 64", "fair");
  const PolicyResult& adaptive_fifo = Find(results, "adaptive", "first come");
  const PolicyResult& adaptive_fair = Find(results, "adaptive", "fair");
  // No limit: everything goes in and waits in the upstream's queue.
  EXPECT_GT(none.p99_ms, 10'000);
  // First come: the light tenants wait as long as the heavy one.
  EXPECT_GT(fixed_fifo.light_p99_ms, 4'000);
  EXPECT_GT(adaptive_fifo.light_p99_ms, 4'000);
  // Fair: they are served within a few service times.
  EXPECT_LT(fixed_fair.light_p99_ms, 1'000);
  EXPECT_LT(adaptive_fair.light_p99_ms, 1'000);
  // The adaptive limit settles near the knee (8) rather than at 64, and
  // serves as much as the upstream can.
  EXPECT_GE(adaptive_fair.final_limit, 4);
  EXPECT_LE(adaptive_fair.final_limit, 32);
  EXPECT_GE(adaptive_fair.goodput, 0.9 * fixed_fair.goodput);
  EXPECT_LE(adaptive_fair.p50_ms, fixed_fair.p50_ms);
  for (const PolicyResult& r : results) {
    EXPECT_EQ(r.served + r.refused + r.failed, static_cast<std::int64_t>(times.size())) << r.limit;
  }
}

TEST(ReplayUpstream, PrintsOneRowPerPolicyAndRefusesABadLine) {
  UpstreamReplayOptions options;
  options.input_name = "t.csv";
  std::istringstream in("t_ms,key\n0,a\n10,b\n20,a\n");
  std::ostringstream out, err;
  ASSERT_EQ(RunUpstreamReplay(options, in, out, err), 0) << err.str();
  EXPECT_EQ(out.str().substr(0, out.str().find('\n')),
            "limit,order,served,refused,failed,goodput_per_s,p50_ms,p99_ms,light_p99_ms,"
            "final_limit");
  EXPECT_NE(out.str().find("\nnone,-,3,0,0,"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("\nadaptive,fair,3,0,0,"), std::string::npos) << out.str();
  std::istringstream bad("0,a\n5\n");
  std::ostringstream out2, err2;
  EXPECT_EQ(RunUpstreamReplay(options, bad, out2, err2), 1);
  EXPECT_EQ(err2.str().rfind("t.csv:2: ", 0), 0u) << err2.str();
}

TEST(ReplayUpstream, FlagsSayWhatIsWrong) {
  std::string problem;
  auto ok = ParseUpstreamReplayFlags({"--upstream-model", "--capacity", "4", "--service-time",
                                      "20ms", "--concurrency", "12", "--max-delay", "1s"},
                                     problem);
  ASSERT_TRUE(ok) << problem;
  EXPECT_EQ(ok->upstream.capacity, 4);
  EXPECT_EQ(ok->upstream.service_ms, 20);
  EXPECT_EQ(ok->concurrency, 12);
  EXPECT_EQ(ok->max_delay_ms, 1000);
  EXPECT_FALSE(ParseUpstreamReplayFlags({"--upstream-model", "--capacity", "0"}, problem));
  EXPECT_EQ(problem, "--capacity must be an integer of at least 1; got \"0\"");
  EXPECT_FALSE(ParseUpstreamReplayFlags({"--upstream-model", "--limit", "3"}, problem));
  EXPECT_EQ(problem, "unknown option --limit (with --upstream-model)");
  EXPECT_FALSE(ParseUpstreamReplayFlags({"--upstream-model", "--config", "x.toml"}, problem));
  EXPECT_EQ(problem, "--config and --upstream go together");
  EXPECT_FALSE(ParseUpstreamReplayFlags(
      {"--upstream-model", "--config", "x.toml", "--upstream", "u", "--concurrency", "3"},
      problem));
  EXPECT_NE(problem.find("take the gateway's side from the file"), std::string::npos);
}

TEST(ReplayUpstream, TheGatewaysSideComesFromAConfiguredUpstream) {
  const std::string file = ::testing::TempDir() + "replay_upstream.toml";
  std::ofstream(file) << R"([[listeners]]
address = "127.0.0.1:0"
[limits]
max_waiting = 300
[timeouts]
upstream_response = "7s"
[[upstreams]]
name = "api"
servers = ["127.0.0.1:9"]
concurrency = 12
max_connections_delay = "2s"
[[routes]]
path_prefix = "/"
upstream = "api"
)";
  std::string problem;
  auto options = ParseUpstreamReplayFlags(
      {"--upstream-model", "--capacity", "3", "--config", file, "--upstream", "api"}, problem);
  ASSERT_TRUE(options) << problem;
  EXPECT_EQ(options->upstream.capacity, 3);
  EXPECT_EQ(options->concurrency, 12);
  EXPECT_EQ(options->max_delay_ms, 2000);
  EXPECT_EQ(options->max_waiting, 300);
  EXPECT_EQ(options->timeout_ms, 7000);
  EXPECT_FALSE(ParseUpstreamReplayFlags(
      {"--upstream-model", "--config", file, "--upstream", "other"}, problem));
  EXPECT_EQ(problem, file + " has no upstream named \"other\"");
}

}  // namespace
}  // namespace tollgate::gateway
