// RecentUse: the recent use of keys LeasingStore no longer tracks (a cold
// key's hand is forgotten as soon as its spent take is answered), so that a
// key that comes back within a lease_ttl or two is sized by its rate as if
// its hand had been kept. A direct-mapped table of a fixed number of slots
// by the key's 64-bit hash: a key whose slot another key took since is
// simply new again (its next take may be sized too small, never too
// large), and what it costs per key is one slot, not an allocation or a
// timer. Not thread-safe (one per LeasingStore).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "store/lease_hand.h"

namespace tollgate::store {

class RecentUse {
 public:
  // `slots`: rounded up to a power of two; allocated on the first Put.
  explicit RecentUse(std::size_t slots) {
    while (size_ < slots) size_ *= 2;
  }

  // The use last recorded for `hash`, or null.
  const LeaseHand::Use* Find(std::uint64_t hash) const {
    if (slots_.empty()) return nullptr;
    const Slot& slot = slots_[hash & (size_ - 1)];
    return slot.hash == Tag(hash) ? &slot.use : nullptr;
  }

  void Put(std::uint64_t hash, const LeaseHand::Use& use) {
    if (slots_.empty()) slots_.resize(size_);
    slots_[hash & (size_ - 1)] = {Tag(hash), use};
  }

 private:
  struct Slot {
    std::uint64_t hash = 0;  // 0: empty
    LeaseHand::Use use;
  };
  static std::uint64_t Tag(std::uint64_t hash) { return hash == 0 ? 1 : hash; }

  std::size_t size_ = 1;
  std::vector<Slot> slots_;
};

}  // namespace tollgate::store
