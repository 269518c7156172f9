#include "store/local_store.h"

#include <algorithm>
#include <bit>
#include <string_view>
#include <unordered_map>

#include "store/local_shard.h"

namespace tollgate::store {

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
  if (request.limit->calendar) {
    DecideRequest at = request;
    at.now_ms = request.limit->TimeOf(request.now_ms);
    return shard.Decide(hash, at);
  }
  return shard.Decide(hash, request);
}

void LocalStore::Inspect(const DecideRequest& request, std::span<algorithms::WindowView> out) {
  const Partition& partition = *directory_.load(std::memory_order_acquire)[request.partition];
  const std::uint64_t hash = KeyHash(request.key);
  DecideRequest at = request;
  at.now_ms = request.limit->TimeOf(request.now_ms);
  partition.ShardFor(hash).Inspect(hash, at, out);
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
  SettleRequest at = request;
  at.reservation.now_ms = r.limit->TimeOf(r.now_ms);
  at.now_ms = r.limit->TimeOf(request.now_ms);
  return partition.ShardFor(hash).Settle(hash, at);
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
