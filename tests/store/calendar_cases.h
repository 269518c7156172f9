// Calendar windows (store/calendar.h) decided by a store on a manual
// clock, the same cases for every store: Europe/Berlin periods across a
// month end and the daylight-saving changes of 2026 (29 March, a day of
// 23 hours; 25 October, of 25 hours), their real resets, and a refund
// dropped when its period is over.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>

#include "store/calendar.h"
#include "store/store.h"

namespace tollgate::store {

// Unix ms of some instants of 2026 (UTC).
inline constexpr std::int64_t kMar28At2330 = 1'774'740'600'000;  // 00:30 CET, 29 March
inline constexpr std::int64_t kMar29At2200 = 1'774'821'600'000;  // 00:00 CEST, 30 March
inline constexpr std::int64_t kMar31At2130 = 1'774'992'600'000;  // 23:30 CEST
inline constexpr std::int64_t kMar31At2150 = 1'774'993'800'000;
inline constexpr std::int64_t kMar31At2200 = 1'774'994'400'000;  // 00:00 CEST, 1 April
inline constexpr std::int64_t kMar31At2210 = 1'774'995'000'000;
inline constexpr std::int64_t kOct18At2200 = 1'792'360'800'000;  // Monday 00:00 CEST
inline constexpr std::int64_t kOct24At2200 = 1'792'879'200'000;  // 00:00 CEST, 25 October
inline constexpr std::int64_t kOct25At2300 = 1'792'969'200'000;  // Monday 00:00 CET
inline constexpr std::int64_t kHourMs = 3'600'000;

// A calendar limit of `limit` units per period of `unit` in Berlin.
inline LimitSpec BerlinLimit(CalendarUnit unit, std::int64_t limit) {
  std::string error;
  std::shared_ptr<const Calendar> calendar = Calendar::Make(unit, "Europe/Berlin", error);
  EXPECT_NE(calendar, nullptr) << error;
  algorithms::LimitParams p;
  p.algorithm = algorithms::Algorithm::kFixedWindow;
  p.limit = limit;
  p.window_ms = Calendar::SpanMs(unit);
  return LimitSpec::Make({p}, calendar);
}

// A store under test: decides `cost` units of `key` at `unix_ms`, and
// settles a reservation, each waiting for the answer.
struct CalendarStore {
  std::function<algorithms::Decision(const DecideRequest&)> decide;
  std::function<algorithms::Decision(const SettleRequest&)> settle;
};

// Uses up `limit` units at `at`: the next unit waits for the period's end.
inline void ExpectResetAt(CalendarStore& s, const LimitSpec& spec, const std::string& key,
                          std::int64_t at, std::int64_t end) {
  const std::int64_t limit = spec.windows[0].limit;
  const algorithms::Decision all = s.decide({key, &spec, limit, at});
  ASSERT_TRUE(all.allowed) << key;
  EXPECT_EQ(all.reset_ms, end - at) << key;
  const algorithms::Decision refused = s.decide({key, &spec, 1, at});
  EXPECT_FALSE(refused.allowed) << key;
  EXPECT_EQ(refused.retry_after_ms, end - at) << key;
  EXPECT_FALSE(s.decide({key, &spec, 1, end - 1}).allowed) << key;
  const algorithms::Decision next = s.decide({key, &spec, 1, end});
  EXPECT_TRUE(next.allowed) << key;
  EXPECT_EQ(next.remaining, limit - 1) << key;
}

inline void RunCalendarCases(CalendarStore s) {
  const LimitSpec day = BerlinLimit(CalendarUnit::kDay, 3);
  const LimitSpec week = BerlinLimit(CalendarUnit::kWeek, 3);
  const LimitSpec month = BerlinLimit(CalendarUnit::kMonth, 3);
  // A month ends at local midnight, half an hour later.
  ExpectResetAt(s, month, "month-end", kMar31At2130, kMar31At2200);
  // 29 March lasts 23 hours, 25 October 25.
  ExpectResetAt(s, day, "spring", kMar28At2330, kMar29At2200);
  EXPECT_EQ(kMar29At2200 - (kMar28At2330 - kHourMs / 2), 23 * kHourMs);
  ExpectResetAt(s, day, "autumn", kOct24At2200, kOct25At2300);
  // A week runs from Monday to Monday: 7 days and the hour given back.
  ExpectResetAt(s, week, "week", kOct18At2200, kOct25At2300);
  // A refund of March is dropped in April; a charge counts in April.
  const DecideRequest reserved{"settle", &month, 3, kMar31At2150};
  ASSERT_TRUE(s.decide(reserved).allowed);
  EXPECT_EQ(s.settle({reserved, 0, kMar31At2210}).remaining, 3);
  const DecideRequest april{"settle", &month, 2, kMar31At2210};
  ASSERT_TRUE(s.decide(april).allowed);
  EXPECT_EQ(s.settle({april, 1, kMar31At2210 + 1000}).remaining, 2);
}

}  // namespace tollgate::store
