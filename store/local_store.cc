#include "store/local_store.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>
#include <unordered_map>

#include "algorithms/decide.h"
#include "algorithms/settle.h"
#include "algorithms/state.h"
#include "algorithms/validate.h"

namespace tollgate::store {
namespace {

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

Entry* NewEntry(std::string_view key, const LimitSpec& spec, std::int64_t now_ms) {
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

void FreeEntry(Entry* e) {
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
// into pthread cost more per decision (docs/performance.md). A thread that finds it taken waits in std::atomic::wait
// (libstdc++ spins briefly, then sleeps on a futex). The mutex of U.
// Drepper's "Futexes Are Tricky": the state says whether anybody may be
// asleep, so that an uncontended unlock wakes nobody.
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

}  // namespace

// An open-addressing table (linear probing, backward-shift deletion) of
// entry pointers, with its own lock and CLOCK hand.
class alignas(64) LocalStore::Shard {
 public:
  Shard() : slots_(kInitialSlots) { Publish(); }
  ~Shard() {
    for (Slot& s : slots_) {
      if (s.entry != nullptr) FreeEntry(s.entry);
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
    slots_[i].meta = kReferenced | Tick(r.now_ms + d.reset_ms);
    return d;
  }

  void Inspect(std::uint64_t hash, const DecideRequest& r,
               std::span<algorithms::WindowView> out) {
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
      if (s.entry != nullptr) FreeEntry(s.entry);
    }
    std::vector<Slot>(kInitialSlots).swap(slots_);
    hand_ = 0;
    size_.store(0, std::memory_order_relaxed);
    Publish();
  }

 private:
  struct Slot {
    std::uint32_t hash = 0;  // low bits of the key's hash: its home slot
    std::uint32_t meta = 0;  // kReferenced | expiry tick
    Entry* entry = nullptr;
  };
  static constexpr std::size_t kNoSlot = ~std::size_t{0};

  std::size_t mask() const { return slots_.size() - 1; }

  std::uint32_t Tick(std::int64_t expires_ms) const {
    const std::int64_t after = expires_ms - base_ms_;
    if (after <= 0) return 0;
    const std::int64_t ticks = (after + (std::int64_t{1} << kTickShift) - 1) >> kTickShift;
    return static_cast<std::uint32_t>(std::min<std::int64_t>(ticks, kNeverExpires));
  }

  bool Expired(std::uint32_t meta, std::int64_t now_ms) const {
    const std::uint32_t tick = meta & ~kReferenced;
    return tick != kNeverExpires && base_ms_ + (std::int64_t{tick} << kTickShift) <= now_ms;
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
        Entry* e = slots_[i].entry;
        if (e->fingerprint == r.limit->fingerprint) return i;
        // The rule's limit changed: its state starts afresh.
        Entry* fresh = NewEntry(r.key, *r.limit, r.now_ms);
        if (fresh == nullptr) return kNoSlot;
        FreeEntry(e);
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
    Entry* e = NewEntry(r.key, *r.limit, r.now_ms);
    if (e == nullptr) return kNoSlot;
    size_.store(size() + 1, std::memory_order_relaxed);
    return Place({hash, kReferenced, e});
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
    FreeEntry(slots_[i].entry);
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
    for (std::size_t step = 0; step < kSweepStep; ++step) {
      Slot& s = slots_[hand_];
      if (s.entry != nullptr) {
        if (Expired(s.meta, now_ms)) {
          EraseAt(hand_);
          continue;  // a shifted entry may now sit under the hand
        }
        s.meta &= ~kReferenced;
      }
      hand_ = (hand_ + 1) & mask();
    }
  }

  void EvictOne() {
    for (;;) {
      Slot& s = slots_[hand_];
      if (s.entry != nullptr) {
        if ((s.meta & kReferenced) == 0) {
          EraseAt(hand_);
          evictions_.fetch_add(1, std::memory_order_relaxed);
          return;
        }
        s.meta &= ~kReferenced;
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
  alignas(64) ShardLock mutex_;
  std::size_t max_keys_ = 1;
  std::vector<Slot> slots_;
  std::size_t hand_ = 0;
  std::int64_t base_ms_ = 0;  // time of the first decision: tick 0
  bool based_ = false;
  std::atomic<std::size_t> size_{0};
  std::atomic<std::uint64_t> evictions_{0};
};

// One rule's keys: shards of their own, sharing the partition's bound.
class LocalStore::Partition {
 public:
  Partition(std::size_t shards, std::size_t max_keys) : mask_(shards - 1) {
    for (std::size_t i = 0; i < shards; ++i) shards_.push_back(std::make_unique<Shard>());
    SetMaxKeys(max_keys);
  }

  // High bits of the key's hash pick the shard; low bits the slot inside it.
  Shard& ShardFor(std::uint64_t hash) const { return *shards_[(hash >> 40) & mask_]; }

  // Each shard an even part, at least one key: a bound below the number of
  // shards holds a key per shard (only after a reload gave the partition a
  // share far below the one it was made for, or emptied it).
  void SetMaxKeys(std::size_t max_keys) {
    const std::size_t n = shards_.size();
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t part = max_keys / n + (i < max_keys % n ? 1 : 0);
      shards_[i]->SetMaxKeys(std::max<std::size_t>(1, part));
    }
  }

  void Clear() {
    for (const auto& s : shards_) s->Clear();
  }

  std::size_t shards() const { return shards_.size(); }

  std::size_t KeyCount() const {
    std::size_t n = 0;
    for (const auto& s : shards_) n += s->size();
    return n;
  }

  std::uint64_t Evictions() const {
    std::uint64_t n = 0;
    for (const auto& s : shards_) n += s->evictions();
    return n;
  }

  // Under LocalStore::assign_mutex_: the rule's name ("": none) and
  // Evictions() when it got it.
  std::string name;
  std::uint64_t evictions_base = 0;

 private:
  std::vector<std::unique_ptr<Shard>> shards_;
  const std::size_t mask_;
};

namespace {

std::size_t ShardCount(const LocalStoreOptions& options, std::size_t max_keys) {
  if (options.shards != 0) return std::bit_ceil(options.shards);
  std::size_t n = std::clamp<std::size_t>(std::bit_ceil(max_keys / 1024), 64, 1024);
  // A small partition in few shards: CLOCK's choice of a key to evict is
  // made among a shard's keys, and a shard of one or two keys has no choice.
  while (n > 1 && n * 8 > max_keys) n /= 2;
  return n;
}

}  // namespace

LocalStore::LocalStore(LocalStoreOptions options) : options_(options) {
  std::lock_guard lock(assign_mutex_);
  NewPartition(options_.max_keys);
}

LocalStore::~LocalStore() = default;

LocalStore::Partition& LocalStore::NewPartition(std::size_t max_keys) {
  auto made = std::make_unique<Partition>(ShardCount(options_, max_keys), max_keys);
  Partition& partition = *made;
  const std::size_t index = partitions_.size();
  if (index == capacity_) {
    // A new directory for decisions to read; decisions reading the old one
    // find there every partition their indices name.
    capacity_ = std::max<std::size_t>(8, capacity_ * 2);
    auto grown = std::make_unique<Partition*[]>(capacity_);
    for (std::size_t i = 0; i < index; ++i) grown[i] = partitions_[i].get();
    grown[index] = &partition;
    directory_.store(grown.get(), std::memory_order_release);
    directories_.push_back(std::move(grown));
  } else {
    // A slot no decision reads until an index naming it is handed out.
    directories_.back()[index] = &partition;
  }
  partitions_.push_back(std::move(made));
  return partition;
}

std::vector<std::uint32_t> LocalStore::AssignPartitions(std::span<const PartitionShare> shares) {
  std::lock_guard lock(assign_mutex_);
  constexpr std::uint32_t kNone = ~std::uint32_t{0};
  std::unordered_map<std::string_view, std::uint32_t> named;
  for (std::size_t i = 0; i < partitions_.size(); ++i) {
    if (!partitions_[i]->name.empty()) {
      named.emplace(partitions_[i]->name, static_cast<std::uint32_t>(i));
    }
  }
  std::vector<std::uint32_t> out(shares.size(), kNone);
  std::vector<bool> kept(partitions_.size(), false);
  for (std::size_t i = 0; i < shares.size(); ++i) {
    auto it = named.find(shares[i].name);
    if (it != named.end() && !kept[it->second]) {
      out[i] = it->second;
      kept[it->second] = true;
    }
  }
  // The partitions of names no longer given are emptied (their rule is
  // gone: its keys would otherwise stay, as nothing sweeps them), and given
  // to new names whose share wants as many shards. A decision of an older
  // configuration may still put a key of the old rule in one: it is bounded
  // there like any other key.
  std::vector<std::uint32_t> free;
  for (std::size_t p = 0; p < partitions_.size(); ++p) {
    if (kept[p]) continue;
    Partition& partition = *partitions_[p];
    partition.Clear();
    partition.SetMaxKeys(0);
    partition.name.clear();
    free.push_back(static_cast<std::uint32_t>(p));
  }
  for (std::size_t i = 0; i < shares.size(); ++i) {
    if (out[i] != kNone) continue;
    const std::size_t shards = ShardCount(options_, shares[i].max_keys);
    auto fit = std::find_if(free.begin(), free.end(),
                            [&](std::uint32_t p) { return partitions_[p]->shards() == shards; });
    if (fit != free.end()) {
      out[i] = *fit;
      free.erase(fit);
    } else {
      NewPartition(shares[i].max_keys);
      out[i] = static_cast<std::uint32_t>(partitions_.size() - 1);
    }
    Partition& partition = *partitions_[out[i]];
    partition.name = shares[i].name;
    partition.evictions_base = partition.Evictions();
  }
  for (std::size_t i = 0; i < shares.size(); ++i) {
    partitions_[out[i]]->SetMaxKeys(shares[i].max_keys);
  }
  return out;
}

algorithms::Decision LocalStore::DecideNow(const DecideRequest& request) {
  const Partition& partition = *directory_.load(std::memory_order_acquire)[request.partition];
  // A wrong hash would split the key's state over two shards, silently.
  assert(request.key_hash == 0 || request.key_hash == KeyHash(request.key));
  const std::uint64_t hash = request.key_hash != 0 ? request.key_hash : KeyHash(request.key);
  Shard& shard = partition.ShardFor(hash);
  // Here rather than first thing in Shard::Decide, where it was slower on
  // 1M keys (docs/performance.md).
  shard.Prefetch(static_cast<std::uint32_t>(hash));
  return shard.Decide(hash, request);
}

void LocalStore::Inspect(const DecideRequest& request, std::span<algorithms::WindowView> out) {
  const Partition& partition = *directory_.load(std::memory_order_acquire)[request.partition];
  const std::uint64_t hash = KeyHash(request.key);
  partition.ShardFor(hash).Inspect(hash, request, out);
}

bool LocalStore::Erase(std::string_view key, std::uint32_t partition) {
  const Partition& p = *directory_.load(std::memory_order_acquire)[partition];
  const std::uint64_t hash = KeyHash(key);
  return p.ShardFor(hash).Erase(hash, key);
}

algorithms::Decision LocalStore::SettleNow(const SettleRequest& request) {
  const DecideRequest& r = request.reservation;
  const Partition& partition = *directory_.load(std::memory_order_acquire)[r.partition];
  const std::uint64_t hash = r.key_hash != 0 ? r.key_hash : KeyHash(r.key);
  return partition.ShardFor(hash).Settle(hash, request);
}

void LocalStore::Settle(const SettleRequest& request, DecisionSink& sink) {
  sink.OnDecision(StoreResult{StoreStatus::kOk, ResultSource::kPrimary, SettleNow(request)});
}

void LocalStore::Decide(const DecideRequest& request, DecisionSink& sink) {
  sink.OnDecision(StoreResult{StoreStatus::kOk, ResultSource::kPrimary, DecideNow(request)});
}

std::size_t LocalStore::KeyCount() const {
  std::lock_guard lock(assign_mutex_);
  std::size_t n = 0;
  for (const auto& p : partitions_) n += p->KeyCount();
  return n;
}

std::uint64_t LocalStore::Evictions() const {
  std::lock_guard lock(assign_mutex_);
  std::uint64_t n = 0;
  for (const auto& p : partitions_) n += p->Evictions();
  return n;
}

LocalStore::PartitionStats LocalStore::Stats(std::uint32_t partition) const {
  std::lock_guard lock(assign_mutex_);
  if (partition >= partitions_.size()) return {};
  const Partition& p = *partitions_[partition];
  return {p.KeyCount(), p.Evictions() - p.evictions_base};
}

}  // namespace tollgate::store
