// The gRPC part of the decision listener's HTTP/2: each gRPC stream (the
// HTTP/2 adapter, gateway/h2/adapter.cc, sends the others to the check
// endpoint) is one call of Envoy's ShouldRateLimit (gRPC, rls.h's
// messages), whose descriptors go one by one through the pipeline's
// identify and admit phases
// (gateway/core) with "answer" in place of "forward": each descriptor is
// decided by the rules whose `domain`/`descriptor` match it, at the cost of
// its hits_addend. The answer is a gRPC response (OK or OVER_LIMIT per
// descriptor); on_error = "deny" while the store cannot decide, a malformed
// message or another method end the call with a gRPC status instead
// (UNAVAILABLE, INVALID_ARGUMENT, UNIMPLEMENTED). Logged and counted like
// any request ("HTTP/2.0", tollgate_decision_requests_total{protocol="rls"}).
// Lives on the stream's worker thread.
#pragma once

#include <string_view>

#include "gateway/io/net.h"
#include "rules/ip.h"

namespace tollgate::gateway {

class Http2Stream;
class Worker;

// Serves `stream` (a gRPC call: its content-type is application/grpc) of a
// decision listener's connection until its response has ended. `peer_ip` and `peer` must outlive it.
Task<void> ServeDecisionStream(Worker& worker, Http2Stream& stream, std::string_view peer_ip,
                               const rules::IpAddress& peer);

}  // namespace tollgate::gateway
