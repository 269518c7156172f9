// Phase forward, the steps every forward shares whatever the client's and
// the upstream's protocols: the request's head as the upstream sees it
// (forwarded fields, Via), whether the upstream's own admission has
// anything to decide (Admission::StartUpstream), and the upstream
// exchange's start and end on the exchange's clocks. The exchange itself is
// each adapter's (gateway/http1/forward.cc, forward_http2.cc,
// gateway/h2/adapter.cc). Heavy (Beast): gateway implementation files
// only. Thread-safe (pure, or the caller's exchange).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gateway/core/exchange.h"
#include "gateway/core/http_util.h"
#include "gateway/io/net.h"
#include "rules/config.h"

namespace tollgate::store {
class Clock;
}  // namespace tollgate::store

namespace tollgate::gateway {

struct GatewayState;

// The protocol the client spoke: the received-protocol of the request's Via.
enum class ClientProtocol : std::uint8_t { kHttp1, kHttp2 };

// The request's fields as the upstream sees them: PrepareForwardedRequest's
// forwarded fields, or, when `lines` is not null, PrepareForwardedLines'
// into it (a head that is only serialized); then Via when [server] via is
// on: "1.1 tollgate" or "2 tollgate" by the client's protocol.
void PrepareForwardedHead(const rules::Config& config, Fields& req, std::string_view client_ip,
                          Scheme scheme, ClientProtocol client, std::string* lines = nullptr);

// Whether the upstream's admission has anything to decide (concurrency or
// learn_limits): only then is Admission::StartUpstream asked, with the
// path of the request's target (UpstreamPath).
inline bool AdmitsUpstream(const rules::UpstreamConfig& upstream) {
  return upstream.max_connections > 0 || upstream.adaptive || upstream.learn_limits;
}
inline std::string_view UpstreamPath(std::string_view target) {
  return target.substr(0, target.find('?'));
}

// The upstream exchange with upstream `upstream_index` starts now: its start
// on both clocks, and its metric id when `metrics_on`.
void MarkUpstreamStart(const GatewayState& state, std::size_t upstream_index, bool metrics_on,
                       Exchange& ex);
// The upstream has answered in full (or failed): its end on both clocks.
void MarkUpstreamEnd(const store::Clock& clock, Exchange& ex);

}  // namespace tollgate::gateway
