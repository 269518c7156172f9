#include "gateway/core/fair_places.h"

namespace tollgate::gateway {

struct FairPlaces::Keeper final : store::PlaceKeeper {
  explicit Keeper(FairPlaces& p) : places(p) {}
  void GiveBack(const std::string& key, const std::string&) override { places.GiveBack(key); }
  FairPlaces& places;
};

FairPlaces::FairPlaces() : keeper_(std::make_shared<Keeper>(*this)) {}

std::optional<store::InflightGuard> FairPlaces::TryAcquire(std::string_view key, std::int64_t max,
                                                           std::int64_t* held) {
  std::lock_guard lock(mutex_);
  auto it = keys_.find(key);
  if (it == keys_.end()) {
    if (max <= 0) return std::nullopt;
    it = keys_.try_emplace(std::string(key), FairQueueParams{}).first;
  }
  Key& k = it->second;
  // Those who wait go first, on the limit as it is now.
  k.max = max;
  if (k.queue.size() > 0) Dispatch(it->first, k);
  if (k.held >= max || k.queue.size() > 0) return std::nullopt;
  ++k.held;
  if (held != nullptr) *held = k.held;
  return store::InflightGuard(keeper_, it->first);
}

FairQueue::Pushed FairPlaces::Enqueue(std::string_view key, std::int64_t max, Waiter& waiter,
                                      const FairQueueParams& params) {
  FairQueue::Waiter* pushed_out = nullptr;
  std::lock_guard lock(mutex_);
  waiter.key_ = std::string(key);
  auto it = keys_.try_emplace(waiter.key_, params).first;
  Key& k = it->second;
  k.queue.set_params(params);
  k.max = max;
  const FairQueue::Pushed pushed = k.queue.Push(waiter, pushed_out);
  if (pushed != FairQueue::Pushed::kQueued) {
    ForgetIfIdle(it);
    return pushed;
  }
  if (pushed_out != nullptr) static_cast<Waiter*>(pushed_out)->Notify();
  Dispatch(waiter.key_, k);
  return pushed;
}

bool FairPlaces::Leave(Waiter& waiter) {
  std::lock_guard lock(mutex_);
  if (!FairQueue::queued(waiter)) return waiter.place.has_value();
  auto it = keys_.find(waiter.key_);
  it->second.queue.Remove(waiter);
  ForgetIfIdle(it);
  return false;
}

void FairPlaces::SetLimit(std::string_view key, std::int64_t max) {
  std::lock_guard lock(mutex_);
  auto it = keys_.find(key);
  if (it == keys_.end()) return;
  it->second.max = max;
  Dispatch(it->first, it->second);
}

void FairPlaces::GiveBack(const std::string& name) {
  std::lock_guard lock(mutex_);
  auto it = keys_.find(name);
  if (it == keys_.end()) return;
  --it->second.held;
  Dispatch(name, it->second);
  ForgetIfIdle(it);
}

void FairPlaces::Dispatch(const std::string& name, Key& k) {
  while (k.held < k.max) {
    auto* next = static_cast<Waiter*>(k.queue.Pop());
    if (next == nullptr) return;
    ++k.held;
    next->place.emplace(keeper_, name);
    next->Notify();
  }
}

void FairPlaces::ForgetIfIdle(Keys::iterator it) {
  if (it->second.held <= 0 && it->second.queue.size() == 0) keys_.erase(it);
}

std::int64_t FairPlaces::held(std::string_view key) const {
  std::lock_guard lock(mutex_);
  auto it = keys_.find(key);
  return it == keys_.end() ? 0 : it->second.held;
}

std::size_t FairPlaces::waiting(std::string_view key) const {
  std::lock_guard lock(mutex_);
  auto it = keys_.find(key);
  return it == keys_.end() ? 0 : it->second.queue.size();
}

std::size_t FairPlaces::keys() const {
  std::lock_guard lock(mutex_);
  return keys_.size();
}

}  // namespace tollgate::gateway
