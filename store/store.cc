#include "store/store.h"

#include <algorithm>
#include <cstring>

#include "algorithms/state.h"
#include "store/fleet.h"

namespace tollgate::store {

LimitSpec LimitSpec::Make(std::vector<algorithms::LimitParams> windows,
                          std::shared_ptr<const Calendar> calendar) {
  LimitSpec spec;
  // FNV-1a over the fields that shape a key's state and its meaning, and
  // the stores' state format: when a format changes (kStateFormat goes up),
  // state written in the old one sits under other keys and expires unread
  // instead of being misread by the new code.
  std::uint32_t hash = 2166136261u;
  auto mix = [&hash](std::int64_t v) {
    for (int i = 0; i < 8; ++i) {
      hash ^= static_cast<std::uint8_t>(v >> (8 * i));
      hash *= 16777619u;
    }
  };
  mix(kStateFormat);
  for (const algorithms::LimitParams& p : windows) {
    mix(static_cast<std::int64_t>(p.algorithm));
    mix(p.limit);
    mix(p.window_ms);
    mix(p.burst);
    mix(p.sub_windows);
    mix(static_cast<std::int64_t>(p.shaping));
    spec.state_bytes += algorithms::StateSize(p);
  }
  if (calendar) {
    // Another zone's periods are other windows.
    mix(static_cast<std::int64_t>(calendar->unit()));
    for (const char c : calendar->zone_name()) mix(c);
  }
  spec.fingerprint = hash;
  spec.calendar = std::move(calendar);
  spec.windows = std::move(windows);
  return spec;
}

LimitSpec ShareOf(const LimitSpec& spec, std::int64_t gateways) {
  std::vector<algorithms::LimitParams> windows = spec.windows;
  for (algorithms::LimitParams& p : windows) {
    p.limit = std::max<std::int64_t>(1, p.limit / gateways);
    if (p.algorithm == algorithms::Algorithm::kLeakyBucket) {
      // A leaky bucket holds burst + 1 requests: the shares of that sum to
      // at most it.
      p.burst = std::max<std::int64_t>(0, (p.burst + 1) / gateways - 1);
    } else {
      // A token bucket holds at least one token.
      p.burst = std::max<std::int64_t>(1, p.burst / gateways);
    }
  }
  return LimitSpec::Make(std::move(windows), spec.calendar);
}

}  // namespace tollgate::store
