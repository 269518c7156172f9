// Reading an upstream's own rate-limit answer: what a response says about
// the limit, the reset time and a global block, and which bucket a request
// belongs to. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "algorithms/learned.h"
#include "gateway/io/net.h"
#include "rules/config.h"

namespace tollgate::gateway {

// From X-RateLimit-Limit / RateLimit-Policy (q=) / RateLimit-Limit,
// X-RateLimit-Reset-After / X-RateLimit-Reset (delta seconds, or Unix
// seconds when larger than 10^9) / RateLimit (t=) / RateLimit-Reset, and
// Retry-After (seconds) on 429 and 503. A 429, or a 503 with Retry-After, is
// "limited"; X-RateLimit-Global: true or X-RateLimit-Scope: global makes it
// global. `unix_ms`: now, to turn absolute reset times into delays.
algorithms::LearnedFacts ReadLearnedFacts(unsigned status, const Fields& fields,
                                          std::int64_t unix_ms);

// The bucket of a request to `upstream`: its route's name ("route"), ""
// ("upstream"), or for a path pattern the request path's leading segments
// matching it ("/channels/{id}/messages" → "/channels/42/messages"; a path
// that does not match falls back to the route).
std::string LearnedBucketOf(const rules::UpstreamConfig& upstream, std::string_view route,
                            std::string_view path);

}  // namespace tollgate::gateway
