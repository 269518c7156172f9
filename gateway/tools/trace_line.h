// One line of a `tollgate replay` trace, parsed: the pure part of
// gateway/replay.cc (no I/O, no store), so that it can be tested and fuzzed
// on its own. Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tollgate::gateway {

struct TraceLine {
  enum class Kind {
    kSkip,   // blank, a `#` comment, or the header line
    kRow,    // t_ms, key, cost are set
    kError,  // error is set
  };
  Kind kind = Kind::kSkip;
  std::int64_t t_ms = 0;      // 0 to algorithms::kMaxTimeMs
  std::string_view key;       // within the line; not empty, at most store::kMaxKeyBytes
  std::int64_t cost = 0;      // as written, or default_cost; any integer
  std::int64_t gateway = -1;  // as written (>= 0), or -1 when not given
  std::int64_t settled = -1;  // as written (>= 0), or -1 when not given
  std::string error;          // without the "name:line: " prefix
};

// What a trace's fourth column holds: the gateway of a `--sync lease`
// fleet, or, when the header names it `settled` (`t_ms,key,cost,settled`),
// the units the request really cost, to which an allowed request's
// reservation of `cost` units is settled (docs/algorithms.md, "Settling a
// reservation").
enum class FourthColumn { kGateway, kSettled };
// The fourth column a header line (one starting with "t_ms") names:
// kGateway unless it is "settled".
FourthColumn FourthColumnOf(std::string_view header);

// `t_ms,key[,cost[,gateway or settled]]` (an empty cost before a fourth
// column: the default; an empty fourth column: none), spaces and tabs
// around fields (and a trailing '\r') ignored; a line starting with "t_ms"
// before the first data line (`seen_data` false) is the header. Not
// checked here: time order, the cost against the limit and the gateway
// against the fleet, which need the run's state (RunReplay checks them).
TraceLine ParseTraceLine(std::string_view text, bool seen_data, std::int64_t default_cost,
                         FourthColumn fourth = FourthColumn::kGateway);

}  // namespace tollgate::gateway
