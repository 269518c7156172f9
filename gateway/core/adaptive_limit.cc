#include "gateway/core/adaptive_limit.h"

#include <algorithm>
#include <cmath>

namespace tollgate::gateway {
namespace {

// A window keeps at most this many latencies: its median is as good from
// the first ones, and memory stays bounded whatever the rate.
constexpr std::size_t kMaxSamples = 1024;
// Per window, the limit moves by at most this factor either way (Envoy's
// gradient bounds): one bad window cannot collapse it.
constexpr double kMinGradient = 0.5;
constexpr double kMaxGradient = 2.0;

}  // namespace

AdaptiveLimit::AdaptiveLimit(const AdaptiveLimitParams& params)
    : params_(params),
      limit_(std::clamp(params.initial_limit, params.min_limit, params.max_limit)),
      limit_exact_(static_cast<double>(limit_.load())) {
  samples_.reserve(kMaxSamples);
}

std::int64_t AdaptiveLimit::min_latency_us() const {
  std::lock_guard lock(mutex_);
  std::int64_t lowest = 0;
  for (const WindowMin& m : minima_) {
    if (lowest == 0 || m.latency_us < lowest) lowest = m.latency_us;
  }
  return lowest;
}

void AdaptiveLimit::Record(std::int64_t latency_us, std::int64_t inflight, SampleOutcome outcome,
                           std::int64_t now_ms) {
  if (outcome == SampleOutcome::kIgnored) return;
  std::lock_guard lock(mutex_);
  if (window_start_ms_ < 0) {
    window_start_ms_ = now_ms;
    next_probe_ms_ = now_ms + params_.probe_interval_ms;
  }
  if (outcome == SampleOutcome::kDropped) {
    ++drops_;
  } else if (samples_.size() < kMaxSamples) {
    samples_.push_back(std::max<std::int64_t>(1, latency_us));
  }
  max_inflight_ = std::max(max_inflight_, inflight);
  if (now_ms - window_start_ms_ >= params_.window_ms &&
      (drops_ > 0 || static_cast<std::int64_t>(samples_.size()) >= params_.min_samples)) {
    CloseWindow(now_ms);
  }
}

void AdaptiveLimit::CloseWindow(std::int64_t now_ms) {
  const double limit = limit_exact_;
  double next = limit;
  double share = params_.smoothing;  // of the step from limit to next
  if (probing_) {
    // The probe's median joins the references; the limit resumes where it
    // was, to be corrected against them from the next window on.
    probing_ = false;
    if (!samples_.empty()) {
      auto middle = samples_.begin() + static_cast<std::ptrdiff_t>(samples_.size() / 2);
      std::nth_element(samples_.begin(), middle, samples_.end());
      minima_.push_back({now_ms, *middle});
    }
  } else if (drops_ > 0) {
    // Timeouts and resets say more than latency does: back off at once,
    // not by a smoothed share.
    next = limit * params_.backoff;
    share = 1.0;
  } else {
    auto middle = samples_.begin() + static_cast<std::ptrdiff_t>(samples_.size() / 2);
    std::nth_element(samples_.begin(), middle, samples_.end());
    const std::int64_t median = *middle;
    minima_.push_back({now_ms, median});
    const auto expired = std::find_if(minima_.begin(), minima_.end(), [&](const WindowMin& m) {
      return m.end_ms >= now_ms - params_.min_rtt_horizon_ms;
    });
    minima_.erase(minima_.begin(), expired);
    std::int64_t reference = median;
    for (const WindowMin& m : minima_) reference = std::min(reference, m.latency_us);
    const double target = params_.target_latency_us > 0
                              ? static_cast<double>(params_.target_latency_us)
                              : static_cast<double>(reference) * (1.0 + params_.tolerance);
    const double gradient =
        std::clamp(target / static_cast<double>(median), kMinGradient, kMaxGradient);
    // The square root is room for a small queue at the upstream, so that the
    // limit keeps probing upward while latency stays near the target.
    next = limit * gradient + std::sqrt(limit);
    // A limit that was not the bound learns nothing about the upstream's
    // capacity from a good window: it does not rise.
    if (next > limit && static_cast<double>(max_inflight_) * 2 < limit) next = limit;
  }
  limit_exact_ = std::clamp(limit + share * (next - limit), static_cast<double>(params_.min_limit),
                            static_cast<double>(params_.max_limit));
  double effective = limit_exact_;
  if (params_.probe_interval_ms > 0 && now_ms >= next_probe_ms_) {
    probing_ = true;
    next_probe_ms_ = now_ms + params_.probe_interval_ms;
    effective =
        std::max(static_cast<double>(params_.min_limit), limit_exact_ * params_.probe_share);
  }
  limit_.store(std::max<std::int64_t>(1, std::llround(effective)), std::memory_order_relaxed);
  window_start_ms_ = now_ms;
  samples_.clear();
  max_inflight_ = 0;
  drops_ = 0;
}

}  // namespace tollgate::gateway
