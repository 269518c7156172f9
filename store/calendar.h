// Calendar windows (docs/algorithms.md, "Calendar windows"): a
// fixed_window whose windows are the days, weeks (from Monday), months or
// years of a time zone, starting at local midnight, daylight-saving
// changes included. The algorithm stays an integer function of time: the
// store hands it the time on a scale where the calendar's period k is
// window k of a fixed window of SpanMs(unit) (AlgorithmTime), so that its
// window index, reset and waits are the period's, in real milliseconds.
// Immutable once made; thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace date {
class time_zone;
}

namespace tollgate::store {

enum class CalendarUnit : std::uint8_t { kDay, kWeek, kMonth, kYear };
// By CalendarUnit: the names of `calendar = "..."`.
inline constexpr std::string_view kCalendarUnitNames[] = {"day", "week", "month", "year"};
std::optional<CalendarUnit> ParseCalendarUnit(std::string_view name);

class Calendar {
 public:
  // The periods of `unit` in the IANA time zone `zone` of the system's tz
  // database (/usr/share/zoneinfo); null with `error` set when it has no
  // such zone. Reads the database once per process (the first call).
  static std::shared_ptr<const Calendar> Make(CalendarUnit unit, std::string_view zone,
                                              std::string& error);

  // The window_ms of the calendar's fixed_window: longer than any period
  // of `unit` in any zone.
  static std::int64_t SpanMs(CalendarUnit unit);

  // The period that holds `unix_ms`: its index (from 1, for the period of
  // 1970-01-01 in the zone) and its bounds in Unix ms, [start_ms, end_ms).
  struct Period {
    std::int64_t index = 0;
    std::int64_t start_ms = 0;
    std::int64_t end_ms = 0;
  };
  Period PeriodOf(std::int64_t unix_ms) const;

  // The time the algorithm sees for `unix_ms` (>= 0): the end of period k
  // is (k + 1) * SpanMs; within a period it moves as real time does. Each
  // thread keeps the last period it looked up, so that a decision within
  // it costs no time zone arithmetic.
  std::int64_t AlgorithmTime(std::int64_t unix_ms) const;

  CalendarUnit unit() const { return unit_; }
  const std::string& zone_name() const { return zone_name_; }

 private:
  Calendar(CalendarUnit unit, const date::time_zone* zone, std::string_view name);

  std::uint64_t id_;  // unique in the process: the per-thread cache's key
  CalendarUnit unit_;
  const date::time_zone* zone_;  // the database's, which lives as long as the process
  std::string zone_name_;
};

}  // namespace tollgate::store
