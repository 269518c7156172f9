#include "gateway/core/log.h"

#include "gateway/core/adaptive_upstream.h"
#include "gateway/core/exchange.h"
#include "gateway/telemetry/access_log.h"
#include "gateway/telemetry/metrics.h"
#include "gateway/core/gateway_state.h"
#include "base/loop_time.h"

namespace tollgate::gateway {

void LogExchange(const GatewayState& state, ThreadMetrics* metrics, std::string_view client,
                 const Exchange& ex) {
  if (ex.adaptive != nullptr) EndAdaptiveExchange(ex);
  if (metrics != nullptr && ex.status != 0) {
    const auto now = store::LoopNow();
    const int route = ex.route_metric >= 0 ? ex.route_metric : state.unrouted_id;
    metrics->RecordRequest(route, ex.status,
                           std::chrono::duration<double>(now - ex.started).count());
    if (ex.upstream_metric >= 0) {
      const auto end = ex.upstream_ended > ex.upstream_started ? ex.upstream_ended : now;
      metrics->RecordUpstream(ex.upstream_metric,
                              std::chrono::duration<double>(end - ex.upstream_started).count());
    }
  }
  AccessLog* log = state.access_log;
  if (log == nullptr || !log->enabled()) return;
  const std::int64_t now = state.clock->NowMs();
  AccessRecord r;
  r.client = client;
  r.method = ex.method.empty() ? std::string_view("-") : std::string_view(ex.method);
  r.target = ex.target.empty() ? std::string_view("-") : std::string_view(ex.target);
  r.version = ex.version;
  r.status = ex.status;
  r.bytes_in = ex.bytes_in;
  r.bytes_out = ex.bytes_out;
  r.duration_s = static_cast<double>(now - ex.start_ms) / 1000.0;
  if (ex.upstream_start_ms >= 0) {
    const std::int64_t end = ex.upstream_end_ms >= 0 ? ex.upstream_end_ms : now;
    r.upstream_s = static_cast<double>(end - ex.upstream_start_ms) / 1000.0;
  }
  r.route = ex.route;
  r.upstream = ex.upstream;
  r.user_agent = ex.user_agent;
  r.referer = ex.referer;
  r.error = ex.error;
  r.ratelimit = ex.ratelimit;
  r.limit_key = ex.limit_key;
  r.cost_reserved = ex.cost_reserved;
  r.cost_settled = ex.cost_settled;
  r.retry_after_ms = ex.retry_after_ms;
  r.request_id = ex.request_id;
  log->Write(r);
}

}  // namespace tollgate::gateway
