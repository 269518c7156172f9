// Calendar periods (store/calendar.h) in a zone with daylight saving, and
// calendar windows on the local store (calendar_cases.h).
#include "store/calendar.h"

#include <gtest/gtest.h>

#include "calendar_cases.h"
#include "store/local_store.h"

namespace tollgate::store {
namespace {

std::shared_ptr<const Calendar> Berlin(CalendarUnit unit) {
  std::string error;
  auto calendar = Calendar::Make(unit, "Europe/Berlin", error);
  EXPECT_NE(calendar, nullptr) << error;
  return calendar;
}

TEST(Calendar, PeriodsStartAtLocalMidnightMondayTheFirstAndNewYear) {
  const Calendar::Period day = Berlin(CalendarUnit::kDay)->PeriodOf(kMar28At2330);
  EXPECT_EQ(day.start_ms, kMar28At2330 - kHourMs / 2);
  EXPECT_EQ(day.end_ms, kMar29At2200);
  const Calendar::Period autumn = Berlin(CalendarUnit::kDay)->PeriodOf(kOct24At2200 + 1);
  EXPECT_EQ(autumn.end_ms - autumn.start_ms, 25 * kHourMs);
  const Calendar::Period week = Berlin(CalendarUnit::kWeek)->PeriodOf(kOct24At2200);
  EXPECT_EQ(week.start_ms, kOct18At2200);
  EXPECT_EQ(week.end_ms, kOct25At2300);
  const Calendar::Period march = Berlin(CalendarUnit::kMonth)->PeriodOf(kMar31At2130);
  const Calendar::Period april = Berlin(CalendarUnit::kMonth)->PeriodOf(kMar31At2200);
  EXPECT_EQ(march.end_ms, kMar31At2200);
  EXPECT_EQ(april.start_ms, kMar31At2200);
  EXPECT_EQ(april.index, march.index + 1);
  // 2027 begins in Berlin at 23:00 UTC on 31 December 2026.
  const Calendar::Period year = Berlin(CalendarUnit::kYear)->PeriodOf(1'798'758'000'000 - 1);
  EXPECT_EQ(year.end_ms, 1'798'758'000'000);
}

TEST(Calendar, AlgorithmTimeIsAFixedWindowOfThePeriods) {
  for (const CalendarUnit unit :
       {CalendarUnit::kDay, CalendarUnit::kWeek, CalendarUnit::kMonth, CalendarUnit::kYear}) {
    const auto calendar = Berlin(unit);
    const std::int64_t span = Calendar::SpanMs(unit);
    for (std::int64_t t = kMar28At2330 - 400 * 24 * kHourMs; t < kOct25At2300;
         t += 7 * kHourMs + 12'345) {
      const Calendar::Period p = calendar->PeriodOf(t);
      const std::int64_t at = calendar->AlgorithmTime(t);
      ASSERT_EQ(at / span, p.index) << t;
      ASSERT_EQ((p.index + 1) * span - at, p.end_ms - t) << t;
      ASSERT_LE(p.start_ms, t);
      ASSERT_LT(t, p.end_ms);
    }
  }
}

TEST(Calendar, UnknownZonesAreRefused) {
  std::string error;
  EXPECT_EQ(Calendar::Make(CalendarUnit::kDay, "Mars/Olympus_Mons", error), nullptr);
  EXPECT_NE(error.find("Mars/Olympus_Mons"), std::string::npos) << error;
  EXPECT_NE(Calendar::Make(CalendarUnit::kDay, "UTC", error), nullptr);
}

TEST(CalendarLocalStore, PeriodsAcrossAMonthEndAndDaylightSavingChanges) {
  LocalStore store;
  RunCalendarCases({[&](const DecideRequest& r) { return store.DecideNow(r); },
                    [&](const SettleRequest& r) { return store.SettleNow(r); }});
}

}  // namespace
}  // namespace tollgate::store
