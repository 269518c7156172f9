// `tollgate replay`: runs a request trace through one limit with a virtual
// clock (the trace's timestamps), so a rule can be tried on real traffic
// before it is deployed, and stores can be compared decision by decision.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/limit.h"
#include "gateway/tools/trace_line.h"
#include "store/redis_options.h"

namespace tollgate::gateway {

// `--sync lease --gateways N`: a fleet deciding from leases
// (gateway/tools/replay_lease.h).
struct LeaseReplay {
  std::int64_t gateways = 3;   // 1 to kMaxGateways
  std::int64_t ttl_ms = 1000;  // lease_ttl
  std::int64_t max_units = 1;  // lease_max
  static constexpr std::int64_t kMaxGateways = 1024;
};

struct ReplayOptions {
  std::vector<algorithms::LimitParams> windows;  // validated by RunReplay
  std::string input_name = "<stdin>";            // for error messages
  std::int64_t default_cost = 1;                 // for lines without a cost
  // Set: decide on this Redis (time = "client": the trace's timestamps; keys
  // under a prefix unique to the run) instead of a local store.
  std::optional<store::RedisAddress> redis;
  // Set: a fleet deciding from leases, next to one exact local store.
  std::optional<LeaseReplay> lease;
};

// The rows of a trace, in order: each line parsed (ParseTraceLine), what it
// skips skipped, and what needs the run checked: time order, the cost
// against the limit, and the gateway column against the fleet. Not
// thread-safe; `in` and `options` must outlive it.
class TraceReader {
 public:
  TraceReader(std::istream& in, const ReplayOptions& options);
  enum class Next { kRow, kEnd, kError };
  // kRow: `row` is the next row (its key points into the reader: valid
  // until the next call); kError: `error` says why, at line().
  Next Read(TraceLine& row, std::string& error);
  std::size_t line() const { return line_; }
  // Whether the header names a settled column (FourthColumnOf).
  bool settles() const { return fourth_ == FourthColumn::kSettled; }

 private:
  std::istream& in_;
  const ReplayOptions& options_;
  std::string text_;
  std::size_t line_ = 0;
  bool seen_data_ = false;
  std::int64_t last_t_ = 0;
  FourthColumn fourth_ = FourthColumn::kGateway;  // as the header says
};

// Input: CSV lines `t_ms,key[,cost]`, an optional header line, `#` comments.
// Output: `t_ms,key,cost,decision,remaining,retry_after_ms,delay_ms` rows;
// a per-key summary goes to `err`. Returns the process exit code: 0, or 1
// after printing `name:line: message` for the first bad line.
int RunReplay(const ReplayOptions& options, std::istream& in, std::ostream& out, std::ostream& err);

}  // namespace tollgate::gateway
