#include "store/calendar.h"

#include <date/tz.h>

#include <atomic>
#include <chrono>
#include <exception>

namespace tollgate::store {
namespace {

using std::chrono::milliseconds;

constexpr std::int64_t kDayMs = 86'400'000;

// Unix ms of local midnight `day` in `zone`: a midnight that a change
// skips is the change's instant; one that occurs twice, the first.
std::int64_t MidnightMs(const date::time_zone& zone, date::local_days day) {
  return std::chrono::duration_cast<milliseconds>(
             zone.to_sys(day, date::choose::earliest).time_since_epoch())
      .count();
}

// The period a thread last looked up, of the calendar `id` (0: none).
struct LastPeriod {
  std::uint64_t id = 0;
  Calendar::Period period;
};
thread_local LastPeriod last_period;

std::atomic<std::uint64_t> next_calendar_id{1};

}  // namespace

Calendar::Calendar(CalendarUnit unit, const date::time_zone* zone, std::string_view name)
    : id_(next_calendar_id.fetch_add(1, std::memory_order_relaxed)),
      unit_(unit),
      zone_(zone),
      zone_name_(name) {}

std::optional<CalendarUnit> ParseCalendarUnit(std::string_view name) {
  for (std::size_t i = 0; i < std::size(kCalendarUnitNames); ++i) {
    if (kCalendarUnitNames[i] == name) return static_cast<CalendarUnit>(i);
  }
  return std::nullopt;
}

std::shared_ptr<const Calendar> Calendar::Make(CalendarUnit unit, std::string_view zone,
                                               std::string& error) {
  try {
    const date::time_zone* found = date::locate_zone(zone);
    return std::shared_ptr<const Calendar>(new Calendar(unit, found, zone));
  } catch (const std::exception& e) {
    // An unknown name, or no database at all (no tzdata installed).
    error = e.what();
    return nullptr;
  }
}

std::int64_t Calendar::SpanMs(CalendarUnit unit) {
  // A day between two offsets can last up to a day and a few hours (a
  // zone moving across the date line, an offset changed by hours): one
  // more day than the longest period covers every zone.
  switch (unit) {
    case CalendarUnit::kDay:
      return 2 * kDayMs;
    case CalendarUnit::kWeek:
      return 8 * kDayMs;
    case CalendarUnit::kMonth:
      return 32 * kDayMs;
    case CalendarUnit::kYear:
      return 367 * kDayMs;
  }
  return 2 * kDayMs;
}

Calendar::Period Calendar::PeriodOf(std::int64_t unix_ms) const {
  const date::sys_time<milliseconds> t{milliseconds{unix_ms}};
  const date::local_days today = date::floor<date::days>(zone_->to_local(t));
  const date::year_month_day ymd{today};
  constexpr date::local_days kEpoch{date::year{1970} / 1 / 1};
  date::local_days start = today;
  date::local_days end = today + date::days{1};
  std::int64_t index = 0;
  switch (unit_) {
    case CalendarUnit::kDay:
      index = (today - kEpoch).count() + 1;
      break;
    case CalendarUnit::kWeek: {
      start = today - (date::weekday{today} - date::Monday);
      end = start + date::days{7};
      // 1970-01-01 was a Thursday: its week began on 1969-12-29.
      index = (start - (kEpoch - date::days{3})).count() / 7 + 1;
      break;
    }
    case CalendarUnit::kMonth: {
      const date::year_month first = ymd.year() / ymd.month();
      start = date::local_days{first / 1};
      end = date::local_days{(first + date::months{1}) / 1};
      index = (static_cast<int>(ymd.year()) - 1970) * 12 +
              static_cast<int>(static_cast<unsigned>(ymd.month())) - 1 + 1;
      break;
    }
    case CalendarUnit::kYear:
      start = date::local_days{ymd.year() / 1 / 1};
      end = date::local_days{(ymd.year() + date::years{1}) / 1 / 1};
      index = static_cast<int>(ymd.year()) - 1970 + 1;
      break;
  }
  return {index, MidnightMs(*zone_, start), MidnightMs(*zone_, end)};
}

std::int64_t Calendar::AlgorithmTime(std::int64_t unix_ms) const {
  LastPeriod& last = last_period;
  if (last.id != id_ || unix_ms < last.period.start_ms || unix_ms >= last.period.end_ms) {
    last = {id_, PeriodOf(unix_ms)};
  }
  const Period& p = last.period;
  return (p.index + 1) * SpanMs(unit_) - (p.end_ms - unix_ms);
}

}  // namespace tollgate::store
