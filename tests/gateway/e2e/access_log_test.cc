// The JSON access log: one valid JSON object per line, whatever bytes the
// requests carried, with the rule, decision, key kind and wait of limited
// requests and never a token.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <fstream>
#include <regex>
#include <thread>

#include "test_support.h"

namespace tollgate::testing {
namespace {

// A quiet gateway's lines reach the file while it runs (it flushes every
// second), not only when 4 KB have gathered or the process exits. The wait
// gives up after 30 s, a hang guard.
TEST(AccessLog, ALineReachesTheFileWhileTheGatewayRuns) {
  auto echo = StartEcho();
  TempDir dir;
  const std::string log = dir.path() + "/access.log";
  std::string config = BasicConfig();
  config.replace(config.find("access = \"off\""), 14, "access = \"" + log + "\"");
  TestGateway gateway(config, echo->port());
  Client client(gateway.port());
  EXPECT_EQ(client.Get("/one-quiet-request").result_int(), 200);
  std::string content;
  for (int i = 0; i < 1500 && content.find("/one-quiet-request") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::ifstream in(log);
    content.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  EXPECT_NE(content.find("/one-quiet-request"), std::string::npos) << content;
}

TEST(AccessLog, JsonLinesAreValidAndSayWhatLimited) {
  auto echo = StartEcho();
  TempDir dir;
  const std::string log = dir.path() + "/access.log";
  std::string config = BasicConfig(R"(
[[rules]]
name = "per-ip"
key = "ip"
algorithm = "fixed_window"
limit = 2
window = "1m"
)");
  config.replace(config.find("access = \"off\""), 14,
                 "access = \"" + log + "\"\nformat = \"json\"");
  {
    TestGateway gateway(config, echo->port());
    Client client(gateway.port());
    EXPECT_EQ(client.Get("/a?q=\"quoted\"").result_int(), 200);
    EXPECT_EQ(client
                  .Get("/b",
                       "User-Agent: caf\xc3\xa9 \xff\xfe bytes\r\n"
                       "Authorization: Bearer secret-token-value\r\n")
                  .result_int(),
              200);
    EXPECT_EQ(client.Get("/c").result_int(), 429);
    Client bad(gateway.port());
    bad.Send("GET /x HTTP/1.1\r\nHost: a\r\nBad Header\r\n\r\n");
    EXPECT_EQ(bad.Read().result_int(), 400);
    // A line is written after its response: wait (while serving) for all 4,
    // up to 30 s (a hang guard).
    for (int i = 0; i < 1500; ++i) {
      std::ifstream count(log);
      std::string l;
      int n = 0;
      while (std::getline(count, l)) ++n;
      if (n >= 4) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  std::ifstream in(log);
  std::string line;
  int lines = 0;
  bool saw_limited = false;
  while (std::getline(in, line)) {
    ++lines;
    EXPECT_EQ(line.find("secret-token-value"), std::string::npos) << line;
    boost::system::error_code ec;
    const boost::json::value v = boost::json::parse(line, ec);
    ASSERT_FALSE(ec) << "line " << lines << " is not JSON: " << line;
    const auto& o = v.as_object();
    // RFC 3339 times with milliseconds; seconds as plain decimals.
    EXPECT_TRUE(std::regex_match(std::string(o.at("time").as_string()),
                                 std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")))
        << line;
    EXPECT_TRUE(std::regex_search(line, std::regex(R"("duration_s":\d+\.\d{3}[,}])"))) << line;
    EXPECT_EQ(line.find("E0"), std::string::npos) << line;
    if (o.at("status").as_int64() == 429) {
      saw_limited = true;
      EXPECT_EQ(o.at("ratelimit").as_string(), "per-ip:limited");
      EXPECT_EQ(o.at("limit_key").as_string(), "ip");
      EXPECT_GT(o.at("retry_after_ms").as_int64(), 0);
    }
  }
  EXPECT_EQ(lines, 4);
  EXPECT_TRUE(saw_limited);
}

}  // namespace
}  // namespace tollgate::testing
