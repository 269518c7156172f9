#include "gateway/core/fair_places.h"

namespace tollgate::gateway {

FairPlaces::Keys::iterator FairPlaces::Entry(std::string_view key, const FairQueueParams& params) {
  auto it = keys_.find(key);
  if (it == keys_.end()) {
    it = keys_.try_emplace(std::string(key), params).first;
    it->second.name = &it->first;
  }
  return it;
}

std::optional<FairPlaces::Place> FairPlaces::TryAcquire(std::string_view key, std::int64_t max,
                                                        std::int64_t* held) {
  std::lock_guard lock(mutex_);
  auto it = keys_.find(key);
  if (it == keys_.end()) {
    if (max <= 0) return std::nullopt;
    it = Entry(key, FairQueueParams{});
  }
  Key& k = it->second;
  // Those who wait go first, on the limit as it is now.
  k.max = max;
  if (k.queue.size() > 0) Dispatch(k);
  if (k.held >= max || k.queue.size() > 0) return std::nullopt;
  ++k.held;
  if (held != nullptr) *held = k.held;
  return Place(this, &k);
}

FairQueue::Pushed FairPlaces::Enqueue(std::string_view key, std::int64_t max, Waiter& waiter,
                                      const FairQueueParams& params) {
  FairQueue::Waiter* pushed_out = nullptr;
  std::lock_guard lock(mutex_);
  waiter.key_ = std::string(key);
  auto it = Entry(key, params);
  Key& k = it->second;
  k.queue.set_params(params);
  k.max = max;
  const FairQueue::Pushed pushed = k.queue.Push(waiter, pushed_out);
  if (pushed != FairQueue::Pushed::kQueued) {
    ForgetIfIdle(it);
    return pushed;
  }
  if (pushed_out != nullptr) static_cast<Waiter*>(pushed_out)->Notify();
  Dispatch(k);
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
  Dispatch(it->second);
}

void FairPlaces::GiveBack(Key& k) {
  std::lock_guard lock(mutex_);
  --k.held;
  if (k.queue.size() > 0) Dispatch(k);
  // A key nobody holds or waits for goes (a held place keeps it).
  if (Idle(k)) keys_.erase(keys_.find(*k.name));
}

void FairPlaces::Dispatch(Key& k) {
  while (k.held < k.max) {
    auto* next = static_cast<Waiter*>(k.queue.Pop());
    if (next == nullptr) return;
    ++k.held;
    next->place = Place(this, &k);
    next->Notify();
  }
}

void FairPlaces::ForgetIfIdle(Keys::iterator it) {
  if (Idle(it->second)) keys_.erase(it);
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
