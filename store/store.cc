#include "store/store.h"

#include <cstring>

#include "algorithms/state.h"

namespace tollgate::store {

LimitSpec LimitSpec::Make(std::vector<algorithms::LimitParams> windows) {
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
  spec.fingerprint = hash;
  spec.windows = std::move(windows);
  return spec;
}

}  // namespace tollgate::store
