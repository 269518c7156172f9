// An upstream with `concurrency = "adaptive"` as the request path sees it:
// its AdaptiveLimit sets how many places its FairPlaces hand out, and each
// exchange that held one of them becomes a sample when it ends:
//  - answered in full (ResponseFilter::End): its latency, from sending the
//    request to the end of the response, the time the place was held; an
//    upstream 503 or 504 is a drop (overload), another 5xx or a 429 no
//    sample (fast errors and the upstream's own rate limits say nothing of
//    its capacity);
//  - not answered: a timeout (tollgate's 504) is a drop; a refusal, a
//    failed connection, a reset, a cut body or a client that left is no
//    sample (EndAdaptiveExchange, from LogExchange).
// One per adaptive upstream, shared by every worker and kept across reloads
// that leave its parameters as they were (AdaptiveUpstreams). Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gateway/core/adaptive_limit.h"
#include "rules/config.h"

namespace tollgate::gateway {

class FairPlaces;
struct Exchange;

class AdaptiveUpstream {
 public:
  // `places` outlives it (the server's).
  AdaptiveUpstream(std::string name, const rules::AdaptiveConcurrencyConfig& config,
                   FairPlaces& places);

  const std::string& name() const { return name_; }
  const rules::AdaptiveConcurrencyConfig& config() const { return config_; }
  // The current limit; lock-free.
  std::int64_t limit() const { return limit_.limit(); }
  std::int64_t min_latency_us() const { return limit_.min_latency_us(); }

  // The exchange `ex`, which held a place of this upstream, ended so
  // (`now_ms`: the injected clock's); the places follow a limit that moved.
  void Record(const Exchange& ex, SampleOutcome outcome, std::int64_t now_ms);

 private:
  const std::string name_;
  const rules::AdaptiveConcurrencyConfig config_;
  FairPlaces& places_;
  AdaptiveLimit limit_;
};

AdaptiveLimitParams AdaptiveParamsOf(const rules::AdaptiveConcurrencyConfig& config);

// The upstream answered `ex` in full: its sample, by the status it gave.
void EndAnsweredExchange(Exchange& ex);
// `ex` is over (logged): when it held an adaptive place and was not
// answered, what that says (a timeout: a drop).
void EndAdaptiveExchange(const Exchange& ex);

// The adaptive upstreams of one configuration, by index in its upstreams
// (null: not adaptive). Controllers of `before` (the configuration before,
// or null) whose upstream keeps its name and parameters go on, learned limit
// and all.
std::vector<std::shared_ptr<AdaptiveUpstream>> MakeAdaptiveUpstreams(
    const std::vector<rules::UpstreamConfig>& upstreams,
    const std::vector<std::shared_ptr<AdaptiveUpstream>>* before, FairPlaces& places);

}  // namespace tollgate::gateway
