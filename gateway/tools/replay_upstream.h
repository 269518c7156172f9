// `tollgate replay --upstream-model`: a trace of arrivals (`t_ms,key`, the
// key naming the request's flow: a tenant, a user) replayed against a
// model of an upstream, to show what an upstream's concurrency limit —
// none, a fixed one, the adaptive one — and the waiting order — first
// come, first served, or fair between flows — would have done to it.
//
// The model: `capacity` requests are served at once in `service_ms` each,
// and beyond that more slowly in proportion: a request that starts with k
// in flight takes service_ms × max(k, capacity) ÷ capacity (the echo
// upstream's /_test/knee/ is the same model). The
// gateway side is the real code: FairQueue (gateway/core/fair_queue.h)
// orders the waiters, AdaptiveLimit (gateway/core/adaptive_limit.h)
// finds the limit from the latencies, both on the trace's clock. A request
// that waits longer than `max_delay_ms` is refused; one the upstream takes
// longer than `timeout_ms` to answer is cut there and failed (a drop for
// the adaptive limit, as the gateway's 504). Single-threaded; no I/O but
// the streams it is given.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "gateway/core/adaptive_limit.h"

namespace tollgate::gateway {

struct UpstreamModel {
  std::int64_t capacity = 8;
  std::int64_t service_ms = 50;
};

struct UpstreamReplayOptions {
  UpstreamModel upstream;
  // A fixed limit to compare (nullopt: only none and adaptive).
  std::optional<std::int64_t> concurrency;
  AdaptiveLimitParams adaptive;
  std::int64_t max_delay_ms = 5'000;
  std::int64_t max_waiting = 10'000;
  std::int64_t timeout_ms = 30'000;
  std::string input_name = "<stdin>";
};

// What one policy did to the whole trace.
struct PolicyResult {
  std::string limit;  // "none", "fixed 16", "adaptive"
  std::string order;  // "first come", "fair" ("-" with no limit)
  std::int64_t served = 0;
  std::int64_t refused = 0;  // waited past max_delay, or the room was full
  std::int64_t failed = 0;   // cut at timeout_ms
  double goodput = 0;        // served per second, from the first arrival to the last answer
  std::int64_t p50_ms = 0;
  std::int64_t p99_ms = 0;
  // p99 of the requests of the flows that sent no more than the median
  // flow: what the light tenants saw.
  std::int64_t light_p99_ms = 0;
  std::int64_t final_limit = 0;  // adaptive: where the limit ended
};

// The policies run over arrivals at `times` (in order) of flows `flows`
// (0, 1, ...: indexes, parallel to times): no limit; the fixed one if
// given; adaptive; each limit first come, first served and then fair.
std::vector<PolicyResult> SimulateUpstream(const UpstreamReplayOptions& options,
                                           const std::vector<std::int64_t>& times,
                                           const std::vector<std::uint32_t>& flows);

// Reads the trace from `in` (the `tollgate replay` format; cost and
// further columns ignored), prints one CSV row per policy to `out` and
// returns 0; a bad line: `name:line: message` on `err`, 1.
int RunUpstreamReplay(const UpstreamReplayOptions& options, std::istream& in, std::ostream& out,
                      std::ostream& err);

// `tollgate replay --upstream-model`'s flags (`args`: replay's own):
// --capacity, --service-time, and the gateway's side either from
// --concurrency, --max-delay, --max-waiting, --timeout or from an
// upstream of a configuration (--config FILE --upstream NAME). nullopt:
// `problem` says what is wrong.
std::optional<UpstreamReplayOptions> ParseUpstreamReplayFlags(const std::vector<std::string>& args,
                                                              std::string& problem);

}  // namespace tollgate::gateway
