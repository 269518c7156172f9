// Envoy's rate limit service (RLS v3, envoy.service.ratelimit.v3), its
// messages: a ShouldRateLimit call's request read from its gRPC message
// and checked, and the answer built from what the rules decided for each
// descriptor. The messages are the project's copies of Envoy's .proto
// files (gateway/decision/proto/), compiled with libprotobuf. No I/O: the
// HTTP/2 adapter of the decision listener (rls_call.h) drives it. Pure;
// thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/limit.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "gateway/core/respond.h"
#include "rules/request_facts.h"
#include "rules/rule.h"

namespace tollgate::gateway {

namespace rls = ::envoy::service::ratelimit::v3;

// The gRPC method the decision listener serves.
inline constexpr std::string_view kShouldRateLimitPath =
    "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

// Reads the one gRPC length-prefixed message of a unary call's request
// body into `request` and checks what Envoy's validation rules require
// (a domain, at least one descriptor, at least one entry each, every
// entry with a key), and that a descriptor's limit can be decided (a known
// unit; a fixed window the stores compute exactly; 0 refuses every call, as
// in envoyproxy/ratelimit). Unknown fields are skipped, as protobuf does. Empty
// when good; else the problem, naming the field ("descriptors[1].entries[0].key:
// must not be empty"), for an INVALID_ARGUMENT status.
std::string ParseRateLimitRequest(std::string_view body, rls::RateLimitRequest& request);

// The descriptor's own limit (its `limit`: requests_per_unit per unit, a
// MONTH of 30 days and a YEAR of 365 as in envoyproxy/ratelimit) into
// `out`; false when it has none. ParseRateLimitRequest has checked it.
bool DescriptorLimitOf(
    const ::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor& descriptor,
    rules::DescriptorLimit& out);

// What a descriptor's cost is: its own hits_addend, else the request's,
// else 1; bounded so that a call cannot ask for more than a rule could
// ever hold (kMaxHitsAddend).
inline constexpr std::int64_t kMaxHitsAddend = std::int64_t{1} << 40;
std::int64_t DescriptorCost(const rls::RateLimitRequest& request,
                            const ::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor&
                                descriptor);

// How one descriptor was decided.
struct DescriptorVerdict {
  bool over_limit = false;
  // The rule that speaks for it (the one that limited it, or the one
  // closest to its limit) and its decision; null: no rule applied.
  const rules::RuleConfig* rule = nullptr;
  algorithms::Decision decision;
  // Over the limit: the answer a proxied request would have had (a rule's
  // 429, or an admin block's).
  Answer refusal;
};

// The answer: overall_code (OVER_LIMIT when any descriptor is), one
// DescriptorStatus per verdict (code, current_limit, limit_remaining,
// duration_until_reset), the RateLimit fields of the rule that speaks for
// the whole call (and Retry-After when over the limit) in
// response_headers_to_add, and a refused call's JSON body (the proxy's 429
// body, or an admin block's) in raw_body.
void BuildRateLimitResponse(const std::vector<DescriptorVerdict>& verdicts,
                            rls::RateLimitResponse& response);

// current_limit for a window of `limit` requests per `window_ms`: the
// nearest Unit (on a logarithmic scale) and the limit scaled to it
// (rounded, at least 1 unless `limit` is 0).
void SetCurrentLimit(std::int64_t limit, std::int64_t window_ms,
                     rls::RateLimitResponse::RateLimit& out);

// `message` serialized as one gRPC length-prefixed message.
void AppendGrpcFrame(const google::protobuf::MessageLite& message, std::string& out);

}  // namespace tollgate::gateway
