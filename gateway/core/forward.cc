#include "gateway/core/forward.h"

#include "gateway/core/gateway_state.h"
#include "base/clock.h"

namespace tollgate::gateway {

void PrepareForwardedHead(const rules::Config& config, Fields& req, std::string_view client_ip,
                          Scheme scheme, ClientProtocol client, std::string* lines) {
  if (lines != nullptr) {
    PrepareForwardedLines(req, client_ip, scheme, *lines);
  } else {
    PrepareForwardedRequest(req, client_ip, scheme);
  }
  if (config.server.via) {
    req.set(http::field::via, client == ClientProtocol::kHttp1 ? "1.1 tollgate" : "2 tollgate");
  }
}

void MarkUpstreamStart(const GatewayState& state, std::size_t upstream_index, bool metrics_on,
                       Exchange& ex) {
  const store::Instant start = state.clock->Now();
  ex.upstream_start_ms = start.ms;
  ex.upstream_started = start.steady;
  if (metrics_on) ex.upstream_metric = state.upstream_ids[upstream_index];
}

void MarkUpstreamEnd(const store::Clock& clock, Exchange& ex) {
  const store::Instant end = clock.Now();
  ex.upstream_end_ms = end.ms;
  ex.upstream_ended = end.steady;
}

}  // namespace tollgate::gateway
