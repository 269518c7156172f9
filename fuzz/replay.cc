// `tollgate replay`'s input: each line through ParseTraceLine
// (gateway/tools/trace_line.h), then RunReplay's own checks (time order, the cost
// against the limit) and a decision of the local store, and with a header
// naming a settled column the settle of each allowed reservation, as
// RunReplay does without its I/O. The first bytes choose the limit
// (validated as the command line's are), so the algorithms see fuzzed
// times, keys, costs and settled costs.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "algorithms/limit.h"
#include "algorithms/settle.h"
#include "algorithms/validate.h"
#include "gateway/tools/trace_line.h"
#include "store/local_store.h"

namespace {

namespace algorithms = tollgate::algorithms;
namespace store = tollgate::store;
using tollgate::gateway::FourthColumn;
using tollgate::gateway::FourthColumnOf;
using tollgate::gateway::ParseTraceLine;
using tollgate::gateway::TraceLine;

#define FUZZ_CHECK(cond)  \
  do {                    \
    if (!(cond)) abort(); \
  } while (0)

// Reads a small number from the front of `in`.
std::int64_t Take(std::string_view& in, std::int64_t max) {
  if (in.empty()) return 1;
  const auto v = static_cast<unsigned char>(in.front());
  in.remove_prefix(1);
  return 1 + static_cast<std::int64_t>(v) % max;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  // The limit: 1-2 windows, then one line per row.
  std::vector<algorithms::LimitParams> windows(static_cast<std::size_t>(Take(in, 2)));
  for (algorithms::LimitParams& w : windows) {
    w.algorithm = static_cast<algorithms::Algorithm>(Take(in, algorithms::kAlgorithmCount) - 1);
    w.limit = Take(in, 100);
    w.window_ms = Take(in, 8) * 250;
    w.burst = Take(in, 20) - 1;
    w.sub_windows = Take(in, 12);
    w.shaping = Take(in, 2) == 1 ? algorithms::Shaping::kDelay : algorithms::Shaping::kNoDelay;
  }
  if (algorithms::ValidateWindows(windows)) return -1;  // refused, as on the command line
  const std::int64_t default_cost = Take(in, 3);
  const store::LimitSpec spec = store::LimitSpec::Make(windows);
  store::LocalStore local(store::LocalStoreOptions{.max_keys = 64});

  bool seen_data = false;
  std::int64_t last_t = 0;
  FourthColumn fourth = FourthColumn::kGateway;
  while (!in.empty()) {
    const std::size_t eol = in.find('\n');
    const std::string_view line = in.substr(0, eol);
    in = eol == std::string_view::npos ? std::string_view() : in.substr(eol + 1);

    const TraceLine parsed = ParseTraceLine(line, seen_data, default_cost, fourth);
    if (parsed.kind == TraceLine::Kind::kSkip) {
      if (!seen_data && FourthColumnOf(line) == FourthColumn::kSettled) {
        fourth = FourthColumn::kSettled;
      }
      continue;
    }
    if (parsed.kind == TraceLine::Kind::kError) {
      FUZZ_CHECK(!parsed.error.empty());
      return 0;  // RunReplay stops at the first bad line
    }
    FUZZ_CHECK(parsed.t_ms >= 0 && parsed.t_ms <= algorithms::kMaxTimeMs);
    FUZZ_CHECK(!parsed.key.empty() && parsed.key.size() <= store::kMaxKeyBytes);
    FUZZ_CHECK(parsed.key.find(',') == std::string_view::npos);
    // The key lies within the line.
    FUZZ_CHECK(parsed.key.data() >= line.data() &&
               parsed.key.data() + parsed.key.size() <= line.data() + line.size());
    FUZZ_CHECK(parsed.gateway >= -1 && parsed.settled >= -1);
    if (seen_data && parsed.t_ms < last_t) return 0;
    if (algorithms::ValidateCost(windows, parsed.cost)) return 0;
    if (parsed.gateway >= 0) return 0;  // RunReplay refuses it without --sync lease
    seen_data = true;
    last_t = parsed.t_ms;
    const algorithms::Decision d = local.DecideNow({parsed.key, &spec, parsed.cost, parsed.t_ms});
    // docs/algorithms.md: remaining >= 0; retry_after_ms 0 when
    // allowed, at least 1 when limited.
    FUZZ_CHECK(d.remaining >= 0 && d.delay_ms >= 0);
    FUZZ_CHECK(d.allowed ? d.retry_after_ms == 0 : d.retry_after_ms >= 1);
    if (parsed.settled < 0 || !d.allowed) continue;
    for (const algorithms::LimitParams& w : windows) {
      if (!algorithms::CanSettle(w.algorithm)) return 0;  // RunReplay refuses the row
    }
    const algorithms::Decision s = local.SettleNow(
        {{parsed.key, &spec, parsed.cost, parsed.t_ms}, parsed.settled, parsed.t_ms});
    // The state after the settle: remaining >= 0, even in debt; allowed
    // exactly when a unit would pass now.
    FUZZ_CHECK(s.remaining >= 0 && s.delay_ms == 0 && s.retry_after_ms >= 0);
    FUZZ_CHECK(s.allowed == (s.retry_after_ms == 0));
  }
  return 0;
}
