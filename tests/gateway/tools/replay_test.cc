// `tollgate replay`: golden outputs per algorithm, and bad input; a
// settled column (reservations settled to their actual cost); with
// --sync lease, a simulated fleet never above one exact store.
#include "gateway/tools/replay.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <vector>

#include "files.h"

namespace tollgate::gateway {
namespace {

using algorithms::Algorithm;
using algorithms::LimitParams;
using algorithms::Shaping;

// A file of the replay directory.
std::string ReadReplayFile(const std::string& name) {
  return testing::ReadFile(std::string(TOLLGATE_REPLAY_DIR) + "/" + name);
}

struct Golden {
  std::string file;
  LimitParams params;
};

void PrintTo(const Golden& golden, std::ostream* os) { *os << golden.file; }

class ReplayGolden : public ::testing::TestWithParam<Golden> {};

TEST_P(ReplayGolden, MatchesTheRecordedDecisions) {
  std::istringstream in(ReadReplayFile("trace.csv"));
  std::ostringstream out;
  std::ostringstream err;
  ReplayOptions options;
  options.windows = {GetParam().params};
  EXPECT_EQ(RunReplay(options, in, out, err), 0) << err.str();
  EXPECT_EQ(out.str(), ReadReplayFile(GetParam().file));
  EXPECT_NE(err.str().find("alice: allowed"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    Algorithms, ReplayGolden,
    ::testing::Values(
        Golden{"token_bucket.out", {Algorithm::kTokenBucket, 2, 1000, 3, 10, Shaping::kDelay}},
        Golden{"leaky_bucket.out", {Algorithm::kLeakyBucket, 2, 1000, 2, 10, Shaping::kDelay}},
        Golden{"leaky_bucket_nodelay.out",
               {Algorithm::kLeakyBucket, 2, 1000, 2, 10, Shaping::kNoDelay}},
        Golden{"fixed_window.out", {Algorithm::kFixedWindow, 3, 1000, 0, 10, Shaping::kDelay}},
        Golden{"sliding_log.out", {Algorithm::kSlidingLog, 3, 1000, 0, 10, Shaping::kDelay}},
        Golden{"sub_window.out", {Algorithm::kSubWindow, 3, 1000, 0, 4, Shaping::kDelay}},
        Golden{"two_bucket.out", {Algorithm::kTwoBucket, 3, 1000, 0, 10, Shaping::kDelay}}),
    [](const auto& info) {
      std::string name = info.param.file.substr(0, info.param.file.find('.'));
      return name;
    });

std::string ReplayError(const std::string& trace) {
  std::istringstream in(trace);
  std::ostringstream out;
  std::ostringstream err;
  ReplayOptions options;
  options.input_name = "trace.csv";
  options.windows = {{Algorithm::kFixedWindow, 3, 1000, 0, 10, Shaping::kDelay}};
  EXPECT_EQ(RunReplay(options, in, out, err), 1);
  return err.str();
}

TEST(Replay, BadInputNamesTheLine) {
  EXPECT_EQ(ReplayError("0,a\nnonsense\n"),
            "trace.csv:2: expected \"t_ms,key[,cost[,gateway]]\"\n");
  EXPECT_EQ(ReplayError("# c\n10,a\n5,a\n"), "trace.csv:3: time goes backwards: 5 after 10\n");
  EXPECT_EQ(ReplayError("0,a,4\n"),
            "trace.csv:1: cost 4 exceeds the capacity 3 of this fixed_window limit, so it could "
            "never pass\n");
  EXPECT_EQ(ReplayError("x,a\n"),
            "trace.csv:1: time \"x\" is not a non-negative integer of milliseconds\n");
  EXPECT_EQ(ReplayError("0,a,two\n"), "trace.csv:1: cost \"two\" is not an integer\n");
  EXPECT_EQ(ReplayError("0,a,,1\n"),
            "trace.csv:1: a gateway column needs --sync lease --gateways N\n");
  EXPECT_EQ(ReplayError("0,a,1,x\n"), "trace.csv:1: gateway \"x\" is not a non-negative integer\n");
  // An empty gateway column is none: "0,a,4," is the cost's error.
  EXPECT_EQ(ReplayError("0,a,4,\n"),
            "trace.csv:1: cost 4 exceeds the capacity 3 of this fixed_window limit, so it could "
            "never pass\n");
  // Beyond 2^50 ms the algorithms' arithmetic would overflow (found by
  // fuzz/replay.cc with a time of 2^63 - 1).
  EXPECT_EQ(ReplayError("0,a\n9223372036854775807,a\n"),
            "trace.csv:2: time 9223372036854775807 is too large: at most 1125899906842624 "
            "milliseconds (2^50)\n");
}

TEST(Replay, InvalidLimitIsExplained) {
  std::istringstream in("0,a\n");
  std::ostringstream out;
  std::ostringstream err;
  ReplayOptions options;
  options.windows = {{Algorithm::kSubWindow, 3, 1000, 0, 7, Shaping::kDelay}};
  EXPECT_EQ(RunReplay(options, in, out, err), 1);
  EXPECT_EQ(err.str(),
            "replay: window 1000ms is not divisible into 7 sub_windows of whole milliseconds\n");
}

struct ReplayRun {
  int code;
  std::string out;
  std::string err;
};

ReplayRun ReplayOne(const LimitParams& params, const std::string& trace) {
  std::istringstream in(trace);
  std::ostringstream out;
  std::ostringstream err;
  ReplayOptions options;
  options.input_name = "trace.csv";
  options.windows = {params};
  const int code = RunReplay(options, in, out, err);
  return {code, out.str(), err.str()};
}

TEST(ReplaySettle, ASettledColumnSettlesEachAllowedReservation) {
  // A bucket of 10 tokens, 1 a second: a reservation of 8 settled to 3
  // gives 5 back; one of 7 settled to 12 leaves 5 tokens of debt.
  const ReplayRun r = ReplayOne({Algorithm::kTokenBucket, 1, 1000, 10, 10, Shaping::kDelay},
                                "t_ms,key,cost,settled\n"
                                "0,a,8,3\n"
                                "0,a,7,12\n"
                                "0,a,1,\n"
                                "5999,a,1,1\n"
                                "6000,a,1\n");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "t_ms,key,cost,decision,remaining,retry_after_ms,delay_ms,settled,settled_remaining,"
            "settled_retry_after_ms\n"
            "0,a,8,allowed,2,0,0,3,7,0\n"
            "0,a,7,allowed,0,0,0,12,0,6000\n"
            "0,a,1,limited,0,6000,0,,,\n"
            "5999,a,1,limited,0,1,0,,,\n"
            "6000,a,1,allowed,0,0,0,,,\n");
  // Units: what the allowed requests really cost (a row without a settled
  // value keeps its reservation).
  EXPECT_EQ(r.err, "a: allowed 3, limited 2, units 16\n");
}

TEST(ReplaySettle, BadSettledColumns) {
  const LimitParams window{Algorithm::kFixedWindow, 3, 1000, 0, 10, Shaping::kDelay};
  EXPECT_EQ(ReplayOne(window, "t_ms,key,cost,settled\n0,a,1,x\n").err,
            "trace.csv:2: settled \"x\" is not a non-negative integer\n");
  EXPECT_EQ(ReplayOne(window, "t_ms,key,cost,settled\n0,a,1,-1\n").err,
            "trace.csv:2: settled \"-1\" is not a non-negative integer\n");
  const ReplayRun log = ReplayOne({Algorithm::kSlidingLog, 3, 1000, 0, 10, Shaping::kDelay},
                                  "t_ms,key,cost,settled\n0,a,1,1\n");
  EXPECT_EQ(log.code, 1);
  EXPECT_EQ(log.err, "trace.csv:2: sliding_log cannot settle a reservation (docs/algorithms.md)\n");
  // Without the header the fourth column is a gateway's.
  EXPECT_EQ(ReplayOne(window, "0,a,1,1\n").err,
            "trace.csv:1: a gateway column needs --sync lease --gateways N\n");
  std::istringstream in("t_ms,key,cost,settled\n0,a,1,1\n");
  std::ostringstream out, err;
  ReplayOptions options;
  options.input_name = "trace.csv";
  options.windows = {window};
  options.lease = LeaseReplay{};
  EXPECT_EQ(RunReplay(options, in, out, err), 1);
  EXPECT_EQ(err.str(),
            "trace.csv:2: a settled column needs an exact store: the lease fleet does not "
            "settle\n");
}

// Reservations of an upper bound, settled to at most it: the units the
// allowed requests really cost never exceed the limit in any window, and
// the refunds let more requests in than their reservations alone would.
TEST(ReplaySettle, SettledUnitsNeverExceedTheLimitOfAWindow) {
  constexpr std::int64_t kLimit = 100;
  constexpr std::int64_t kWindow = 1000;
  std::mt19937 random(47);
  std::string trace = "t_ms,key,cost,settled\n";
  std::int64_t t = 0;
  for (int i = 0; i < 5000; ++i) {
    t += static_cast<std::int64_t>(random() % 3);
    const std::int64_t cost = 1 + static_cast<std::int64_t>(random() % 20);
    trace += std::to_string(t) + ",k," + std::to_string(cost) + "," +
             std::to_string(random() % (cost + 1)) + "\n";
  }
  const ReplayRun r =
      ReplayOne({Algorithm::kFixedWindow, kLimit, kWindow, 0, 10, Shaping::kDelay}, trace);
  ASSERT_EQ(r.code, 0) << r.err;
  std::map<std::int64_t, std::int64_t> settled;   // by window
  std::map<std::int64_t, std::int64_t> reserved;  // by window
  std::istringstream rows(r.out);
  std::string line;
  std::getline(rows, line);  // the header
  while (std::getline(rows, line)) {
    std::vector<std::string> f;
    std::stringstream fields(line);
    for (std::string v; std::getline(fields, v, ',');) f.push_back(v);
    ASSERT_GE(f.size(), 8U) << line;
    if (f[3] != "allowed") continue;
    const std::int64_t window = std::stoll(f[0]) / kWindow;
    settled[window] += std::stoll(f[7]);
    reserved[window] += std::stoll(f[2]);
  }
  ASSERT_FALSE(settled.empty());
  bool refunds_let_more_in = false;
  for (const auto& [window, units] : settled) {
    EXPECT_LE(units, kLimit) << "window " << window;
    refunds_let_more_in = refunds_let_more_in || reserved[window] > kLimit;
  }
  EXPECT_TRUE(refunds_let_more_in);
}

// A trace of `rows` unit-cost requests of three keys, 0 to 3 ms apart.
std::string RandomTrace(std::uint32_t seed, int rows) {
  std::mt19937 random(seed);
  std::string trace = "t_ms,key\n";
  std::int64_t t = 0;
  for (int i = 0; i < rows; ++i) {
    t += static_cast<std::int64_t>(random() % 4);
    trace += std::to_string(t) + ",k" + std::to_string(random() % 3) + "\n";
  }
  return trace;
}

struct FleetRun {
  std::string out, err;
  int exit = 0;
};

FleetRun RunFleet(const LimitParams& params, const std::string& trace, std::int64_t gateways,
                  std::int64_t ttl_ms = 200, std::int64_t max_units = 10) {
  std::istringstream in(trace);
  std::ostringstream out, err;
  ReplayOptions options;
  options.windows = {params};
  options.lease = LeaseReplay{gateways, ttl_ms, max_units};
  FleetRun run;
  run.exit = RunReplay(options, in, out, err);
  run.out = out.str();
  run.err = err.str();
  return run;
}

// Per key, what the fleet and the exact store allowed, from the rows.
std::map<std::string, std::pair<int, int>> AllowedByKey(const std::string& out) {
  std::map<std::string, std::pair<int, int>> allowed;
  std::istringstream rows(out);
  std::string row;
  std::getline(rows, row);  // header
  while (std::getline(rows, row)) {
    std::vector<std::string> fields;
    std::istringstream parts(row);
    for (std::string f; std::getline(parts, f, ',');) fields.push_back(f);
    auto& [fleet, exact] = allowed[fields[1]];
    fleet += fields[4] == "allowed";
    exact += fields[5] == "allowed";
  }
  return allowed;
}

TEST(ReplayLease, AFleetNeverAllowsMoreThanOneExactStore) {
  // With unit costs one exact store allows the most any schedule within
  // the limit can: the fleet, within the limit too, allows at most that.
  const LimitParams limits[] = {
      {Algorithm::kTokenBucket, 100, 1000, 100, 10, Shaping::kDelay},
      {Algorithm::kLeakyBucket, 100, 1000, 20, 10, Shaping::kNoDelay},
      {Algorithm::kFixedWindow, 100, 1000, 0, 10, Shaping::kDelay},
      {Algorithm::kSubWindow, 100, 1000, 0, 10, Shaping::kDelay},
      {Algorithm::kTwoBucket, 100, 1000, 0, 10, Shaping::kDelay},
      {Algorithm::kSlidingLog, 100, 1000, 0, 10, Shaping::kDelay},
  };
  for (const LimitParams& params : limits) {
    for (std::uint32_t seed = 1; seed <= 3; ++seed) {
      const std::string trace = RandomTrace(seed, 3000);
      for (std::int64_t gateways : {1, 3, 8}) {
        const FleetRun run = RunFleet(params, trace, gateways);
        ASSERT_EQ(run.exit, 0) << run.err;
        for (const auto& [key, allowed] : AllowedByKey(run.out)) {
          EXPECT_LE(allowed.first, allowed.second)
              << algorithms::AlgorithmName(params.algorithm) << " seed " << seed << " gateways "
              << gateways << " key " << key;
          EXPECT_GT(allowed.first, 0);
        }
      }
    }
  }
}

TEST(ReplayLease, OneGatewayWithAFixedWindowAllowsWhatTheExactStoreAllows) {
  const FleetRun run = RunFleet({Algorithm::kFixedWindow, 100, 1000, 0, 10, Shaping::kDelay},
                                RandomTrace(7, 3000), 1, 1000, 10);
  ASSERT_EQ(run.exit, 0) << run.err;
  for (const auto& [key, allowed] : AllowedByKey(run.out)) {
    EXPECT_EQ(allowed.first, allowed.second) << key;
  }
}

TEST(ReplayLease, RowsGoRoundRobinOrToTheirGatewayColumn) {
  const FleetRun run = RunFleet({Algorithm::kFixedWindow, 3, 1000, 0, 10, Shaping::kDelay},
                                "0,a\n1,a\n2,a,,0\n3,a,1,0\n4,b\n", 2, 1000, 1);
  ASSERT_EQ(run.exit, 0) << run.err;
  EXPECT_EQ(run.out,
            "t_ms,key,cost,gateway,decision,exact_decision\n"
            "0,a,1,0,allowed,allowed\n"
            "1,a,1,1,allowed,allowed\n"
            "2,a,1,0,allowed,allowed\n"
            "3,a,1,0,limited,limited\n"
            "4,b,1,0,allowed,allowed\n");
  EXPECT_NE(run.err.find("gateway 0: allowed 3, limited 1\n"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("a: fleet allowed 3, one exact store allowed 3\n"), std::string::npos);
  EXPECT_NE(run.err.find("fleet of 2: allowed 4 (100.0% of what one exact store allowed: 4)"),
            std::string::npos);
}

TEST(ReplayLease, BadInputAndAlgorithmsThatCannotLease) {
  FleetRun run =
      RunFleet({Algorithm::kFixedWindow, 3, 1000, 0, 10, Shaping::kDelay}, "0,a,,2\n", 2);
  EXPECT_EQ(run.exit, 1);
  EXPECT_EQ(run.err, "<stdin>:1: gateway 2 is not in a fleet of 2 (0 to 1)\n");
  run = RunFleet({Algorithm::kLeakyBucket, 3, 1000, 0, 10, Shaping::kDelay}, "0,a\n", 2);
  EXPECT_EQ(run.exit, 1);
  EXPECT_EQ(run.err,
            "replay: sync = \"lease\" needs nodelay = true with leaky_bucket: a shaping "
            "queue's order cannot be kept for units another gateway holds\n");
}

}  // namespace
}  // namespace tollgate::gateway
