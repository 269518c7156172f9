// `tollgate replay`: golden outputs per algorithm, and bad input.
#include "gateway/tools/replay.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace tollgate::gateway {
namespace {

using algorithms::Algorithm;
using algorithms::LimitParams;
using algorithms::Shaping;

std::string ReadFile(const std::string& name) {
  std::ifstream in(std::string(TOLLGATE_REPLAY_DIR) + "/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Golden {
  std::string file;
  LimitParams params;
};

void PrintTo(const Golden& golden, std::ostream* os) { *os << golden.file; }

class ReplayGolden : public ::testing::TestWithParam<Golden> {};

TEST_P(ReplayGolden, MatchesTheRecordedDecisions) {
  std::istringstream in(ReadFile("trace.csv"));
  std::ostringstream out;
  std::ostringstream err;
  ReplayOptions options;
  options.windows = {GetParam().params};
  EXPECT_EQ(RunReplay(options, in, out, err), 0) << err.str();
  EXPECT_EQ(out.str(), ReadFile(GetParam().file));
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
  EXPECT_EQ(ReplayError("0,a\nnonsense\n"), "trace.csv:2: expected \"t_ms,key[,cost]\"\n");
  EXPECT_EQ(ReplayError("# c\n10,a\n5,a\n"), "trace.csv:3: time goes backwards: 5 after 10\n");
  EXPECT_EQ(ReplayError("0,a,4\n"),
            "trace.csv:1: cost 4 exceeds the capacity 3 of this fixed_window limit, so it could "
            "never pass\n");
  EXPECT_EQ(ReplayError("x,a\n"),
            "trace.csv:1: time \"x\" is not a non-negative integer of milliseconds\n");
  EXPECT_EQ(ReplayError("0,a,two\n"), "trace.csv:1: cost \"two\" is not an integer\n");
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

}  // namespace
}  // namespace tollgate::gateway
