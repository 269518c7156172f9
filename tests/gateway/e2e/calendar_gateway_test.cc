// A calendar rule on a real gateway (both stores), on the manual clock set
// to Unix times: a month in Europe/Berlin ends at local midnight, and the
// 429's Retry-After, the RateLimit fields and the admin API's reset count
// to that real end; the next month starts whole.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <string>

#include "../store/calendar_cases.h"
#include "admin.h"
#include "redis_server.h"
#include "test_support.h"

namespace tollgate::testing {
namespace {

constexpr const char* kMonthly = R"(
[[rules]]
name = "monthly"
key = "header:X-Team"
algorithm = "fixed_window"
limit = 2
calendar = "month"
timezone = "Europe/Berlin"
)";

class CalendarGateway : public ::testing::TestWithParam<bool> {
 protected:
  // Redis (with the gateways' clock) when the parameter says so.
  std::string Config() {
    if (!GetParam()) return BasicConfig(kMonthly);
    redis_ = std::make_unique<RedisServer>();
    return BasicConfig(RedisStoreSection("url = \"" + redis_->url() + "\"", "deny", "500ms",
                                         "time = \"client\"\n") +
                       kMonthly);
  }
  std::unique_ptr<RedisServer> redis_;
};

TEST_P(CalendarGateway, AMonthEndsAtLocalMidnight) {
  auto echo = StartEcho();
  TestGateway gateway(Config(), echo->port());
  Client client(gateway.port());
  // 23:30 on 31 March in Berlin: the month ends in half an hour.
  gateway.clock().Set(store::kMar31At2130);
  ASSERT_EQ(client.Get("/x", "X-Team: a\r\n").result_int(), 200);
  ASSERT_EQ(client.Get("/x", "X-Team: a\r\n").result_int(), 200);
  const Response limited = client.Get("/x", "X-Team: a\r\n");
  ASSERT_EQ(limited.result_int(), 429);
  EXPECT_EQ(limited[http::field::retry_after], "1800");
  EXPECT_NE(std::string(limited["RateLimit"]).find(";t=1800"), std::string::npos)
      << limited["RateLimit"];
  EXPECT_NE(std::string(limited["RateLimit-Policy"]).find(";w=2592000"), std::string::npos)
      << limited["RateLimit-Policy"];
  const Response key =
      AdminRequest(gateway.admin_port(), "GET", "/api/v1/keys?rule=monthly&header:X-Team=a");
  ASSERT_EQ(key.result_int(), 200) << key.body();
  const boost::json::value doc = boost::json::parse(key.body());
  EXPECT_EQ(doc.at("windows").at(0).at("reset_ms"), 1'800'000) << key.body();
  EXPECT_EQ(doc.at("windows").at(0).at("window"), "month") << key.body();
  // A millisecond before midnight still March; at midnight April, whole.
  gateway.clock().Set(store::kMar31At2200 - 1);
  EXPECT_EQ(client.Get("/x", "X-Team: a\r\n").result_int(), 429);
  gateway.clock().Set(store::kMar31At2200);
  EXPECT_EQ(client.Get("/x", "X-Team: a\r\n").result_int(), 200);
  EXPECT_EQ(client.Get("/x", "X-Team: a\r\n").result_int(), 200);
  EXPECT_EQ(client.Get("/x", "X-Team: a\r\n").result_int(), 429);
}

INSTANTIATE_TEST_SUITE_P(Stores, CalendarGateway, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Redis" : "Local";
                         });

}  // namespace
}  // namespace tollgate::testing
