#include "gateway/core/adaptive_upstream.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "gateway/core/exchange.h"
#include "gateway/core/fair_places.h"
#include "gateway/core/respond.h"

namespace tollgate::gateway {

AdaptiveLimitParams AdaptiveParamsOf(const rules::AdaptiveConcurrencyConfig& config) {
  AdaptiveLimitParams p;
  p.min_limit = config.min;
  p.max_limit = config.max;
  p.initial_limit = config.initial;
  p.target_latency_us = config.target_latency_ms * 1000;
  p.tolerance = static_cast<double>(config.tolerance_percent) / 100.0;
  p.window_ms = config.window_ms;
  p.probe_interval_ms = config.probe_interval_ms;
  return p;
}

AdaptiveUpstream::AdaptiveUpstream(std::string name, const rules::AdaptiveConcurrencyConfig& config,
                                   FairPlaces& places)
    : name_(std::move(name)), config_(config), places_(places), limit_(AdaptiveParamsOf(config)) {}

void AdaptiveUpstream::Record(const Exchange& ex, SampleOutcome outcome, std::int64_t now_ms) {
  const auto latency =
      std::chrono::duration_cast<std::chrono::microseconds>(ex.upstream_ended - ex.upstream_started)
          .count();
  const std::int64_t before = limit_.limit();
  limit_.Record(std::max<std::int64_t>(0, latency), ex.adaptive_inflight, outcome, now_ms);
  const std::int64_t after = limit_.limit();
  if (after != before) places_.SetLimit(name_, after);
}

void EndAnsweredExchange(Exchange& ex) {
  AdaptiveUpstream& upstream = *ex.adaptive;
  ex.adaptive = nullptr;  // one sample per exchange
  SampleOutcome outcome = SampleOutcome::kAnswered;
  if (ex.status == 503 || ex.status == 504) {
    outcome = SampleOutcome::kDropped;
  } else if (ex.status == 429 || ex.status >= 500) {
    return;
  }
  upstream.Record(ex, outcome, ex.upstream_end_ms);
}

void EndAdaptiveExchange(const Exchange& ex) {
  if (ex.adaptive == nullptr || ex.error != InfoOf(Refusal::kGatewayTimeout).code) return;
  ex.adaptive->Record(ex, SampleOutcome::kDropped,
                      ex.upstream_end_ms >= 0 ? ex.upstream_end_ms : ex.upstream_start_ms);
}

std::vector<std::shared_ptr<AdaptiveUpstream>> MakeAdaptiveUpstreams(
    const std::vector<rules::UpstreamConfig>& upstreams,
    const std::vector<std::shared_ptr<AdaptiveUpstream>>* before, FairPlaces& places) {
  std::vector<std::shared_ptr<AdaptiveUpstream>> out;
  out.reserve(upstreams.size());
  for (const rules::UpstreamConfig& u : upstreams) {
    std::shared_ptr<AdaptiveUpstream> made;
    if (u.adaptive && before != nullptr) {
      for (const std::shared_ptr<AdaptiveUpstream>& old : *before) {
        if (old != nullptr && old->name() == u.name && old->config() == *u.adaptive) made = old;
      }
    }
    if (u.adaptive && made == nullptr) {
      made = std::make_shared<AdaptiveUpstream>(u.name, *u.adaptive, places);
    }
    out.push_back(std::move(made));
  }
  return out;
}

}  // namespace tollgate::gateway
