#include "gateway/core/adaptive_upstream.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "gateway/core/exchange.h"
#include "gateway/core/fair_places.h"
#include "gateway/core/response_filter.h"

namespace tollgate::gateway {
namespace {

rules::AdaptiveConcurrencyConfig Config() {
  rules::AdaptiveConcurrencyConfig config;
  config.initial = 100;
  config.window_ms = 100;
  return config;
}

// Ends `n` exchanges of 20 ms with `status`, 10 ms apart from `now_ms` on:
// answered in full (ResponseFilter::End), or, with `error`, answered by
// tollgate itself (logged only).
void EndExchanges(AdaptiveUpstream& upstream, int n, unsigned status, std::int64_t& now_ms,
                  std::string_view error = {}) {
  for (int i = 0; i < n; ++i) {
    Exchange ex;
    ex.adaptive = &upstream;
    ex.status = status;
    ex.upstream_started = std::chrono::steady_clock::time_point(std::chrono::milliseconds(now_ms));
    ex.upstream_ended = ex.upstream_started + std::chrono::milliseconds(20);
    ex.upstream_start_ms = now_ms;
    ex.upstream_end_ms = now_ms + 20;
    if (error.empty()) {
      ResponseFilter(ex).End();
      EXPECT_EQ(ex.adaptive, nullptr);  // one sample per exchange
    } else {
      ex.error = error;
    }
    EndAdaptiveExchange(ex);
    now_ms += 10;
  }
}

TEST(AdaptiveUpstreamTest, AnsweredExchangesAreLatencySamples) {
  FairPlaces places;
  AdaptiveUpstream upstream("api", Config(), places);
  std::int64_t now = 0;
  EndExchanges(upstream, 60, 200, now);
  EXPECT_EQ(upstream.min_latency_us(), 20'000);
}

TEST(AdaptiveUpstreamTest, ErrorsAndRateLimitsAreNoSamples) {
  FairPlaces places;
  AdaptiveUpstream upstream("api", Config(), places);
  std::int64_t now = 0;
  EndExchanges(upstream, 60, 429, now);
  EndExchanges(upstream, 60, 500, now);
  // tollgate's own answers: a failed connection, a refusal.
  EndExchanges(upstream, 60, 502, now, "bad_gateway");
  EndExchanges(upstream, 60, 503, now, "upstream_busy");
  EXPECT_EQ(upstream.min_latency_us(), 0);
  EXPECT_EQ(upstream.limit(), 100);
}

TEST(AdaptiveUpstreamTest, OverloadAndTimeoutsAreDrops) {
  FairPlaces places;
  std::int64_t now = 0;
  AdaptiveUpstream overloaded("api", Config(), places);
  EndExchanges(overloaded, 20, 503, now);
  EXPECT_LT(overloaded.limit(), 100);
  EXPECT_EQ(overloaded.min_latency_us(), 0);
  AdaptiveUpstream timing_out("api", Config(), places);
  EndExchanges(timing_out, 20, 504, now, "gateway_timeout");
  EXPECT_LT(timing_out.limit(), 100);
}

TEST(AdaptiveUpstreamTest, AReloadKeepsAnUnchangedControllerOnly) {
  FairPlaces places;
  std::vector<rules::UpstreamConfig> upstreams(3);
  upstreams[0].name = "fixed";
  upstreams[0].max_connections = 4;
  upstreams[1].name = "a";
  upstreams[1].adaptive = Config();
  upstreams[2].name = "b";
  upstreams[2].adaptive = Config();
  const auto first = MakeAdaptiveUpstreams(upstreams, nullptr, places);
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first[0], nullptr);
  ASSERT_NE(first[1], nullptr);
  upstreams[2].adaptive->max = 50;
  const auto second = MakeAdaptiveUpstreams(upstreams, &first, places);
  EXPECT_EQ(second[1], first[1]);
  EXPECT_NE(second[2], first[2]);
  EXPECT_EQ(second[2]->config().max, 50);
}

}  // namespace
}  // namespace tollgate::gateway
