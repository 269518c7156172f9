// Phase log: what an exchange did, into the metrics (requests by route and
// status, durations, upstream time) and the access log (one line), and
// into an adaptive upstream's limit when it was not answered
// (gateway/core/adaptive_upstream.h). Called once per exchange when it has
// ended, on its worker thread.
#pragma once

#include <string_view>

namespace tollgate::gateway {

struct Exchange;
struct GatewayState;
class ThreadMetrics;

// `metrics`: this worker's, null when metrics are off. `client`: the peer's
// address as text.
void LogExchange(const GatewayState& state, ThreadMetrics* metrics, std::string_view client,
                 const Exchange& ex);

}  // namespace tollgate::gateway
