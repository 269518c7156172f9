// Internal to LocalStore (included by local_store.cc only): one shard, an
// open-addressing table of the keys' states with its own lock and CLOCK
// hand, and the per-key entry it points to. Thread-safety: every public
// call of a Shard takes its lock.
#pragma once

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string_view>
#include <vector>

#include "algorithms/decide.h"
#include "algorithms/settle.h"
#include "algorithms/state.h"
#include "algorithms/validate.h"
#include "store/local_store.h"

namespace tollgate::store {
namespace shard {

using algorithms::Algorithm;

// One malloc'd block per key: header, key bytes padded to 8, window states.
// Its expiry and CLOCK bit live in its table slot, so that the sweeping hand
// reads only the table, never the entries it passes.
struct Entry {
  std::uint32_t fingerprint;  // LimitSpec::fingerprint the state belongs to
  std::uint16_t key_len;
  std::uint8_t windows;
  Algorithm algorithm;
  // Followed by the key and the states.

  std::byte* bytes() { return reinterpret_cast<std::byte*>(this); }
  std::string_view key() {
    return {reinterpret_cast<const char*>(bytes() + sizeof(Entry)), key_len};
  }
  std::byte* states() { return bytes() + sizeof(Entry) + PaddedKey(key_len); }

  static std::size_t PaddedKey(std::size_t len) { return (len + 7) & ~std::size_t{7}; }
};
static_assert(sizeof(Entry) == 8, "the per-key header stays compact");

inline Entry* NewEntry(std::string_view key, const LimitSpec& spec, std::int64_t now_ms) {
  const std::size_t size = sizeof(Entry) + Entry::PaddedKey(key.size()) + spec.state_bytes;
  auto* e = static_cast<Entry*>(std::malloc(size));
  if (e == nullptr) return nullptr;
  new (e) Entry{spec.fingerprint, static_cast<std::uint16_t>(key.size()),
                static_cast<std::uint8_t>(spec.windows.size()), spec.windows.front().algorithm};
  std::memcpy(e->bytes() + sizeof(Entry), key.data(), key.size());
  std::byte* state = e->states();
  for (const algorithms::LimitParams& p : spec.windows) {
    algorithms::InitState(p, state, now_ms);
    state += algorithms::StateSize(p);
  }
  return e;
}

inline void FreeEntry(Entry* e) {
  if (e->algorithm == Algorithm::kSlidingLog) {
    // Every sliding_log window state is one pointer.
    for (std::size_t i = 0; i < e->windows; ++i) {
      algorithms::DestroyState(e->algorithm, e->states() + i * sizeof(algorithms::SlidingLogState));
    }
  }
  std::free(e);
}

constexpr std::size_t kSweepStep = 2;
constexpr std::size_t kInitialSlots = 16;

// A slot's expiry is a count of 1024 ms ticks after its shard's first
// decision, rounded up: an entry may be freed up to a second after its state
// is fresh again, never before. 31 bits of ticks last 69 years; the top bit
// of the same word is the CLOCK bit.
constexpr int kTickShift = 10;
constexpr std::uint32_t kReferenced = 1U << 31;
constexpr std::uint32_t kNeverExpires = kReferenced - 1;

// A shard's lock (BasicLockable). Taken and given back with one atomic
// instruction each when no other thread wants it, where std::mutex's calls
// into pthread cost more per decision (docs/performance.md). A thread that finds it taken waits in
// std::atomic::wait (libstdc++ spins briefly, then sleeps on a futex). The mutex of U. Drepper's
// "Futexes Are Tricky": the state says whether anybody may be asleep, so that an uncontended unlock
// wakes nobody.
class ShardLock {
 public:
  void lock() {
    std::uint32_t state = kFree;
    if (state_.compare_exchange_strong(state, kLocked, std::memory_order_acquire)) return;
    // Taken: marked contended, so that its holder wakes a sleeper.
    if (state != kContended) state = state_.exchange(kContended, std::memory_order_acquire);
    while (state != kFree) {
      state_.wait(kContended, std::memory_order_relaxed);
      state = state_.exchange(kContended, std::memory_order_acquire);
    }
  }

  void unlock() {
    // seq_cst (free on x86, whose exchange is a full fence): notify_one reads
    // libstdc++'s waiter count after it, which must not move before the store.
    if (state_.exchange(kFree, std::memory_order_seq_cst) == kContended) state_.notify_one();
  }

 private:
  static constexpr std::uint32_t kFree = 0;
  static constexpr std::uint32_t kLocked = 1;     // no other thread waits
  static constexpr std::uint32_t kContended = 2;  // others may sleep on it
  std::atomic<std::uint32_t> state_{kFree};
};

}  // namespace shard

// An open-addressing table (linear probing, backward-shift deletion) of
// entry pointers, with its own lock and CLOCK hand.
class alignas(64) LocalStore::Shard {
 public:
  Shard() : slots_(shard::kInitialSlots) { Publish(); }
  ~Shard() {
    for (Slot& s : slots_) {
      if (s.entry != nullptr) shard::FreeEntry(s.entry);
    }
  }

  algorithms::Decision Decide(std::uint64_t hash, const DecideRequest& r) {
    return Apply(hash, r, [&](std::span<std::byte* const> states) {
      return algorithms::Decide(r.limit->windows, states, r.now_ms, r.cost);
    });
  }

  algorithms::Decision Settle(std::uint64_t hash, const SettleRequest& s) {
    const DecideRequest r{s.reservation.key, s.reservation.limit, 0, s.now_ms,
                          s.reservation.partition};
    return Apply(hash, r, [&](std::span<std::byte* const> states) {
      return algorithms::Settle(r.limit->windows, states, s.reservation.now_ms, s.now_ms,
                                s.reservation.cost, s.actual);
    });
  }

  // Runs `step` (a decision or a settle) on the states of `r`'s key at
  // r.now_ms under the shard's lock, and keeps the key until the reset_ms
  // of what it returns.
  template <typename Step>
  algorithms::Decision Apply(std::uint64_t hash, const DecideRequest& r, Step&& step) {
    std::lock_guard lock(mutex_);
    if (!based_) {
      based_ = true;
      base_ms_ = r.now_ms;
    }
    Sweep(r.now_ms);
    const std::size_t i = FindOrInsert(static_cast<std::uint32_t>(hash), r);
    if (i == kNoSlot) {
      // Out of memory: decide on a fresh state rather than fail the request.
      algorithms::OwnedState fresh(r.limit->windows, r.now_ms);
      return step(fresh.windows());
    }
    std::byte* pointers[algorithms::kMaxWindows];
    std::byte* state = slots_[i].entry->states();
    for (std::size_t w = 0; w < r.limit->windows.size(); ++w) {
      pointers[w] = state;
      state += algorithms::StateSize(r.limit->windows[w]);
    }
    const algorithms::Decision d =
        step(std::span<std::byte* const>(pointers, r.limit->windows.size()));
    slots_[i].meta = shard::kReferenced | Tick(r.now_ms + d.reset_ms);
    return d;
  }

  void Inspect(std::uint64_t hash, const DecideRequest& r, std::span<algorithms::WindowView> out) {
    std::lock_guard lock(mutex_);
    const std::size_t i = Find(static_cast<std::uint32_t>(hash), r.key);
    if (i == kNoSlot || slots_[i].entry->fingerprint != r.limit->fingerprint) {
      algorithms::OwnedState fresh(r.limit->windows, r.now_ms);
      for (std::size_t w = 0; w < r.limit->windows.size(); ++w) {
        out[w] = algorithms::Inspect(r.limit->windows[w], fresh.windows()[w], r.now_ms);
      }
      return;
    }
    std::byte* state = slots_[i].entry->states();
    for (std::size_t w = 0; w < r.limit->windows.size(); ++w) {
      out[w] = algorithms::Inspect(r.limit->windows[w], state, r.now_ms);
      state += algorithms::StateSize(r.limit->windows[w]);
    }
  }

  bool Erase(std::uint64_t hash, std::string_view key) {
    std::lock_guard lock(mutex_);
    const std::size_t i = Find(static_cast<std::uint32_t>(hash), key);
    if (i == kNoSlot) return false;
    EraseAt(i);
    return true;
  }

  // Starts fetching, without the lock, the lines Decide() will write first:
  // the lock's and the key's home slot's. When another thread used this
  // shard last, the lock's line is in that thread's cache; fetched one after
  // the other, the two would add a transfer between cores to every decision.
  void Prefetch(std::uint32_t hash) const {
    const auto table = view_.table.load(std::memory_order_relaxed);
    const std::size_t mask = view_.mask.load(std::memory_order_relaxed);
    // The two loads may straddle a Grow(): an address outside the table is
    // harmless to a prefetch, which never faults. (Integer arithmetic, as
    // such an address may not be formed as a pointer into the table.)
    const std::uintptr_t slot = table + (hash & mask) * sizeof(Slot);
    // NOLINTNEXTLINE(performance-no-int-to-ptr)
    __builtin_prefetch(reinterpret_cast<const void*>(slot), 1);
    __builtin_prefetch(&mutex_, 1);
  }

  std::size_t size() const { return size_.load(std::memory_order_relaxed); }
  std::uint64_t evictions() const { return evictions_.load(std::memory_order_relaxed); }

  // At least 1. A smaller bound than the keys held is reached as new keys
  // come (FindOrInsert).
  void SetMaxKeys(std::size_t max_keys) {
    std::lock_guard lock(mutex_);
    max_keys_ = max_keys;
  }

  // Frees every entry (its partition's rule is gone).
  void Clear() {
    std::lock_guard lock(mutex_);
    for (Slot& s : slots_) {
      if (s.entry != nullptr) shard::FreeEntry(s.entry);
    }
    std::vector<Slot>(shard::kInitialSlots).swap(slots_);
    hand_ = 0;
    size_.store(0, std::memory_order_relaxed);
    Publish();
  }

 private:
  struct Slot {
    std::uint32_t hash = 0;  // low bits of the key's hash: its home slot
    std::uint32_t meta = 0;  // kReferenced | expiry tick
    shard::Entry* entry = nullptr;
  };
  static constexpr std::size_t kNoSlot = ~std::size_t{0};

  std::size_t mask() const { return slots_.size() - 1; }

  std::uint32_t Tick(std::int64_t expires_ms) const {
    const std::int64_t after = expires_ms - base_ms_;
    if (after <= 0) return 0;
    const std::int64_t ticks =
        (after + (std::int64_t{1} << shard::kTickShift) - 1) >> shard::kTickShift;
    return static_cast<std::uint32_t>(std::min<std::int64_t>(ticks, shard::kNeverExpires));
  }

  bool Expired(std::uint32_t meta, std::int64_t now_ms) const {
    const std::uint32_t tick = meta & ~shard::kReferenced;
    return tick != shard::kNeverExpires &&
           base_ms_ + (std::int64_t{tick} << shard::kTickShift) <= now_ms;
  }

  // The slot of `key`; kNoSlot when it has none.
  std::size_t Find(std::uint32_t hash, std::string_view key) const {
    for (std::size_t i = hash & mask(); slots_[i].entry != nullptr; i = (i + 1) & mask()) {
      if (slots_[i].hash == hash && slots_[i].entry->key() == key) return i;
    }
    return kNoSlot;
  }

  // The slot of the request's key, inserted if new; kNoSlot when out of memory.
  std::size_t FindOrInsert(std::uint32_t hash, const DecideRequest& r) {
    std::size_t i = hash & mask();
    while (slots_[i].entry != nullptr) {
      if (slots_[i].hash == hash && slots_[i].entry->key() == r.key) {
        shard::Entry* e = slots_[i].entry;
        if (e->fingerprint == r.limit->fingerprint) return i;
        // The rule's limit changed: its state starts afresh.
        shard::Entry* fresh = shard::NewEntry(r.key, *r.limit, r.now_ms);
        if (fresh == nullptr) return kNoSlot;
        shard::FreeEntry(e);
        slots_[i].entry = fresh;
        return i;
      }
      i = (i + 1) & mask();
    }
    if (size() >= max_keys_) {
      EvictOne();
      // Over a bound made smaller (a reload gave the partition a smaller
      // share): one more, so that the partition shrinks as keys come.
      if (size() >= max_keys_) EvictOne();
    } else if ((size() + 1) * 4 > slots_.size() * 3) {
      Grow();
    }
    shard::Entry* e = shard::NewEntry(r.key, *r.limit, r.now_ms);
    if (e == nullptr) return kNoSlot;
    size_.store(size() + 1, std::memory_order_relaxed);
    return Place({hash, shard::kReferenced, e});
  }

  std::size_t Place(const Slot& slot) {
    std::size_t i = slot.hash & mask();
    while (slots_[i].entry != nullptr) i = (i + 1) & mask();
    slots_[i] = slot;
    return i;
  }

  void Grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    for (const Slot& s : old) {
      if (s.entry != nullptr) Place(s);
    }
    hand_ = 0;
    Publish();
  }

  void Publish() {
    view_.table.store(reinterpret_cast<std::uintptr_t>(slots_.data()), std::memory_order_relaxed);
    view_.mask.store(mask(), std::memory_order_relaxed);
  }

  // Backward-shift deletion keeps every probe chain unbroken.
  void EraseAt(std::size_t i) {
    shard::FreeEntry(slots_[i].entry);
    slots_[i] = {};
    std::size_t hole = i;
    for (std::size_t j = (i + 1) & mask(); slots_[j].entry != nullptr; j = (j + 1) & mask()) {
      const std::size_t home = slots_[j].hash & mask();
      // Move j into the hole unless its home lies cyclically in (hole, j].
      const bool home_after_hole = ((j - home) & mask()) < ((j - hole) & mask());
      if (!home_after_hole) {
        slots_[hole] = slots_[j];
        slots_[j] = {};
        hole = j;
      }
    }
    size_.store(size() - 1, std::memory_order_relaxed);
  }

  // Frees expired entries and ages reference bits under the hand.
  void Sweep(std::int64_t now_ms) {
    for (std::size_t step = 0; step < shard::kSweepStep; ++step) {
      Slot& s = slots_[hand_];
      if (s.entry != nullptr) {
        if (Expired(s.meta, now_ms)) {
          EraseAt(hand_);
          continue;  // a shifted entry may now sit under the hand
        }
        s.meta &= ~shard::kReferenced;
      }
      hand_ = (hand_ + 1) & mask();
    }
  }

  void EvictOne() {
    for (;;) {
      Slot& s = slots_[hand_];
      if (s.entry != nullptr) {
        if ((s.meta & shard::kReferenced) == 0) {
          EraseAt(hand_);
          evictions_.fetch_add(1, std::memory_order_relaxed);
          return;
        }
        s.meta &= ~shard::kReferenced;
      }
      hand_ = (hand_ + 1) & mask();
    }
  }

  // The table's place for Prefetch(), on a line of its own that only Grow()
  // writes, so that it stays in every core's cache.
  struct alignas(64) View {
    std::atomic<std::uintptr_t> table{0};
    std::atomic<std::size_t> mask{0};
  };
  View view_;
  alignas(64) shard::ShardLock mutex_;
  std::size_t max_keys_ = 1;
  std::vector<Slot> slots_;
  std::size_t hand_ = 0;
  std::int64_t base_ms_ = 0;  // time of the first decision: tick 0
  bool based_ = false;
  std::atomic<std::size_t> size_{0};
  std::atomic<std::uint64_t> evictions_{0};
};

}  // namespace tollgate::store
