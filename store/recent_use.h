// RecentUse: the recent use of keys LeasingStore no longer tracks (a cold
// key's hand is forgotten as soon as its spent take is answered), so that a
// key that comes back soon is sized by its rate as if its hand had been
// kept. A direct-mapped table of a fixed number of 16-byte slots by the
// key's 64-bit hash, small enough to stay in a core's cache: a key whose
// slot another key took since (with N slots and R new keys a second, after
// about N / R seconds) is simply new again, its next take a spent one
// (sized too small, never too large). Not thread-safe (one per
// LeasingStore).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "store/lease_hand.h"

namespace tollgate::store {

class RecentUse {
 public:
  // `slots`: rounded up to a power of two; allocated on the first Put.
  explicit RecentUse(std::size_t slots) {
    while (size_ < slots) size_ *= 2;
  }

  // The use last recorded for `hash`, if its slot still holds it. `now`:
  // the time Put was given is at most 2^31 ms before it.
  std::optional<LeaseHand::Use> Find(std::uint64_t hash, std::int64_t now) const {
    if (slots_.empty()) return std::nullopt;
    const Slot& slot = slots_[hash & (size_ - 1)];
    if (slot.tag != Tag(hash)) return std::nullopt;
    const auto back = [now](std::uint32_t at) {
      return now - static_cast<std::int64_t>(static_cast<std::uint32_t>(now) - at);
    };
    return LeaseHand::Use{back(slot.period_start), slot.used_now, slot.used_before,
                          back(slot.last_use)};
  }

  void Put(std::uint64_t hash, const LeaseHand::Use& use) {
    if (slots_.empty()) slots_.resize(size_);
    // Counts past 65535 units per lease_ttl keep a key leased, never here.
    const auto count = [](std::int64_t n) {
      return static_cast<std::uint16_t>(std::clamp<std::int64_t>(n, 0, 0xffff));
    };
    slots_[hash & (size_ - 1)] = {Tag(hash), static_cast<std::uint32_t>(use.period_start),
                                  static_cast<std::uint32_t>(use.last_use), count(use.used_now),
                                  count(use.used_before)};
  }

 private:
  // Times are kept modulo 2^32 ms.
  struct Slot {
    std::uint32_t tag = 0;  // 0: empty
    std::uint32_t period_start = 0;
    std::uint32_t last_use = 0;
    std::uint16_t used_now = 0;
    std::uint16_t used_before = 0;
  };
  static_assert(sizeof(Slot) == 16);
  // The hash's bits above the index's.
  static std::uint32_t Tag(std::uint64_t hash) {
    const auto tag = static_cast<std::uint32_t>(hash >> 32);
    return tag == 0 ? 1 : tag;
  }

  std::size_t size_ = 1;
  std::vector<Slot> slots_;
};

}  // namespace tollgate::store
