// Calendar windows in the configuration: `calendar` and `timezone` on a
// fixed_window rule, and the errors of what cannot be, at their position.
#include <gtest/gtest.h>

#include "config_text.h"
#include "store/calendar.h"

namespace tollgate::rules {
namespace {

TEST(CalendarConfig, AFixedWindowCountsInTheZonesMonths) {
  LoadResult r = LoadConfigText(std::string(kMinimal) + R"([[rules]]
name = "monthly"
key = "user"
algorithm = "fixed_window"
limit = 1000
calendar = "month"
timezone = "Europe/Berlin"
[[rules]]
name = "daily"
key = "user"
algorithm = "fixed_window"
limit = 10
calendar = "day"
)",
                                "t.toml");
  ASSERT_TRUE(r.config) << r.errors.front().ToString();
  const RuleConfig& monthly = r.config->rules[0];
  ASSERT_NE(monthly.limit->calendar, nullptr);
  EXPECT_EQ(monthly.limit->calendar->unit(), store::CalendarUnit::kMonth);
  EXPECT_EQ(monthly.limit->calendar->zone_name(), "Europe/Berlin");
  EXPECT_EQ(monthly.limit->windows[0].window_ms,
            store::Calendar::SpanMs(store::CalendarUnit::kMonth));
  EXPECT_EQ(monthly.windows[0].text, "month");
  EXPECT_EQ(monthly.windows[0].seconds, 30 * 86'400);
  const RuleConfig& daily = r.config->rules[1];
  EXPECT_EQ(daily.limit->calendar->zone_name(), "UTC");
  // Another zone's days are other windows: the state is not shared.
  EXPECT_NE(daily.limit->fingerprint, monthly.limit->fingerprint);
}

TEST(CalendarConfig, ErrorsArePlaced) {
  const std::vector<std::string> errors = Errors(std::string(kMinimal) + R"([[rules]]
name = "both"
key = "user"
algorithm = "fixed_window"
limit = 1
window = "1d"
calendar = "day"
[[rules]]
name = "zone"
key = "user"
algorithm = "fixed_window"
limit = 1
calendar = "week"
timezone = "Europe/Atlantis"
[[rules]]
name = "bucket"
key = "user"
algorithm = "token_bucket"
limit = 1
calendar = "month"
[[rules]]
name = "alone"
key = "user"
algorithm = "fixed_window"
limit = 1
window = "1h"
timezone = "UTC"
[[rules]]
name = "unit"
key = "user"
algorithm = "fixed_window"
limit = 1
calendar = "fortnight"
)");
  const std::vector<std::string> expected = {
      R"(t.toml:13:10: use either "calendar" or "window", not both: a calendar window is one )"
      R"(period of the calendar)",
      R"(t.toml:21:12: unknown time zone "Europe/Atlantis": the system's time zone database )"
      R"((/usr/share/zoneinfo) has no such zone (Europe/Atlantis not found in timezone database))",
      R"(t.toml:27:12: "calendar" applies to fixed_window only, not token_bucket: its windows )"
      R"(are the calendar's periods)",
      R"(t.toml:34:12: "timezone" applies to "calendar" only)",
      R"(t.toml:40:12: "calendar" must be one of day, week, month, year; got "fortnight")",
  };
  EXPECT_EQ(errors, expected);
}

// A monthly rule on Redis, whose [store.redis] ends with `time_line`, and
// `extra` keys of the rule.
std::string OnRedis(std::string_view time_line, std::string_view extra) {
  return std::string(kMinimal) + R"([store]
kind = "redis"
[store.redis]
url = "redis://127.0.0.1:6379"
)" + std::string(time_line) +
         R"([[rules]]
name = "monthly"
key = "user"
algorithm = "fixed_window"
limit = 1
calendar = "month"
)" + std::string(extra);
}

TEST(CalendarConfig, RedisNeedsTheGatewaysClock) {
  const std::vector<std::string> expected = {
      R"(t.toml:17:12: calendar periods are reckoned on the gateways' clocks: with [store] )"
      R"(kind = "redis" they need [store.redis] time = "client")",
  };
  EXPECT_EQ(Errors(OnRedis("", "")), expected);
  EXPECT_TRUE(Errors(OnRedis("time = \"client\"\n", "sync = \"lease\"\n")).empty());
}

}  // namespace
}  // namespace tollgate::rules
