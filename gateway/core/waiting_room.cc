#include "gateway/core/waiting_room.h"

#include <algorithm>
#include <utility>

namespace tollgate::gateway {

WaitingRoom::Entered WaitingRoom::Enter(std::string_view key, const Bounds& bounds, Waiter& waiter,
                                        std::size_t* ahead) {
  if (ahead != nullptr) *ahead = 0;
  std::lock_guard lock(mutex_);
  auto it = lines_.find(key);
  if (it == lines_.end()) {
    if (total_ >= max_total_ || bounds.max_per_key == 0) return Entered::kRefused;
    it = lines_.try_emplace(std::string(key), FairQueueParams{}).first;
  }
  Line& line = it->second;
  waiter.key_ = it->first;
  waiter.woken_ = false;
  if (line.head == nullptr && line.queue.size() == 0) {
    line.head = &waiter;
    waiter.state_ = Waiter::State::kTurn;
    ++total_;
    return Entered::kTurn;
  }
  // Both bounds as the queue's own: when either is reached, a newcomer
  // may still push out a waiter of a lower priority of this line.
  const std::size_t in_line = line.queue.size() + (line.head != nullptr ? 1 : 0);
  const std::size_t room_left = max_total_ > total_ ? max_total_ - total_ : 0;
  const std::size_t key_left = bounds.max_per_key > in_line ? bounds.max_per_key - in_line : 0;
  line.queue.set_params({.max_per_flow = std::max<std::size_t>(1, bounds.max_per_flow),
                         .max_total = line.queue.size() + std::min(room_left, key_left)});
  FairQueue::Waiter* shed = nullptr;
  if (line.queue.Push(waiter, shed) != FairQueue::Pushed::kQueued) return Entered::kRefused;
  waiter.state_ = Waiter::State::kQueued;
  if (shed != nullptr) {
    auto& out = static_cast<Waiter&>(*shed);
    out.state_ = Waiter::State::kShed;
    out.Notify();
  } else {
    ++total_;
  }
  if (ahead != nullptr) {
    const std::size_t counted = line.queue.Ahead(waiter, kAheadCounted);
    *ahead = (counted < kAheadCounted ? counted : line.queue.size() - 1) + 1;  // the head too
  }
  return Entered::kQueued;
}

WaitingRoom::Status WaitingRoom::StatusOf(const Waiter& waiter) const {
  std::lock_guard lock(mutex_);
  switch (waiter.state_) {
    case Waiter::State::kQueued:
      return Status::kWaiting;
    case Waiter::State::kTurn:
      return Status::kTurn;
    case Waiter::State::kShed:
      return Status::kShed;
    case Waiter::State::kOut:
      break;
  }
  return Status::kOut;
}

void WaitingRoom::Done(Waiter& waiter) {
  std::lock_guard lock(mutex_);
  const Waiter::State state = waiter.state_;
  waiter.state_ = Waiter::State::kOut;
  if (state == Waiter::State::kOut || state == Waiter::State::kShed) return;
  --total_;
  auto it = lines_.find(waiter.key_);
  if (state == Waiter::State::kQueued) {
    it->second.queue.Remove(waiter);
    if (it->second.head == nullptr && it->second.queue.size() == 0) lines_.erase(it);
    return;
  }
  it->second.head = nullptr;
  PassTurn(it);
}

void WaitingRoom::PassTurn(Lines::iterator it) {
  Line& line = it->second;
  auto* next = static_cast<Waiter*>(line.queue.Pop());
  if (next == nullptr) {
    lines_.erase(it);
    return;
  }
  line.head = next;
  next->state_ = Waiter::State::kTurn;
  next->woken_ = false;
  next->Notify();
}

void WaitingRoom::Wake(std::string_view key) {
  std::lock_guard lock(mutex_);
  const auto it = lines_.find(key);
  if (it == lines_.end() || it->second.head == nullptr) return;
  Waiter& head = *it->second.head;
  head.woken_ = true;
  head.Notify();
}

bool WaitingRoom::TakeWake(Waiter& waiter) {
  std::lock_guard lock(mutex_);
  return std::exchange(waiter.woken_, false);
}

std::size_t WaitingRoom::waiting() const {
  std::lock_guard lock(mutex_);
  return total_;
}

std::size_t WaitingRoom::waiting(std::string_view key) const {
  std::lock_guard lock(mutex_);
  const auto it = lines_.find(key);
  if (it == lines_.end()) return 0;
  return it->second.queue.size() + (it->second.head != nullptr ? 1 : 0);
}

std::size_t WaitingRoom::lines() const {
  std::lock_guard lock(mutex_);
  return lines_.size();
}

}  // namespace tollgate::gateway
