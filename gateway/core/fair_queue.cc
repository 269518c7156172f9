#include "gateway/core/fair_queue.h"

#include <algorithm>

namespace tollgate::gateway {

FairQueue::~FairQueue() {
  // Waiters that outlive the queue (shutdown) are left unlinked.
  for (Level& level : levels_) level.line.clear();
}

std::size_t FairQueue::waiting(std::uint64_t flow) const {
  const auto it = flows_.find(flow);
  return it == flows_.end() ? 0 : it->second.waiting;
}

FairQueue::Pushed FairQueue::Push(Waiter& waiter, Waiter*& shed) {
  shed = nullptr;
  if (waiting(waiter.flow) >= params_.max_per_flow) return Pushed::kFlowFull;
  const auto priority = static_cast<std::size_t>(waiter.priority);
  if (total_ >= params_.max_total) {
    // Room only at the expense of a lower level: the waiter that would
    // have waited longest there.
    for (std::size_t lower = kPriorityLevels - 1; lower > priority; --lower) {
      if (levels_[lower].waiting > 0) {
        shed = &*levels_[lower].line.rbegin();
        break;
      }
    }
    if (shed == nullptr) return Pushed::kRoomFull;
    Unlink(*shed);
  }
  Level& level = levels_[priority];
  Flow& flow = flows_[waiter.flow];
  waiter.finish_ = std::max(level.virtual_time, flow.last_finish) +
                   1.0 / std::max<std::uint32_t>(1, waiter.weight);
  waiter.order_ = arrivals_++;
  flow.last_finish = waiter.finish_;
  ++flow.waiting;
  level.line.insert(waiter);
  ++level.waiting;
  ++total_;
  return Pushed::kQueued;
}

FairQueue::Waiter* FairQueue::Pop() {
  for (Level& level : levels_) {
    if (level.waiting == 0) continue;
    Waiter& next = *level.line.begin();
    level.virtual_time = next.finish_;
    Unlink(next);
    return &next;
  }
  return nullptr;
}

std::size_t FairQueue::Ahead(const Waiter& waiter, std::size_t cap) const {
  const auto priority = static_cast<std::size_t>(waiter.priority);
  std::size_t ahead = 0;
  for (std::size_t higher = 0; higher < priority; ++higher) ahead += levels_[higher].waiting;
  const Line& line = levels_[priority].line;
  for (auto it = line.begin(); ahead < cap && it != line.end() && &*it != &waiter; ++it) ++ahead;
  return std::min(ahead, cap);
}

void FairQueue::Remove(Waiter& waiter) {
  if (queued(waiter)) Unlink(waiter);
}

void FairQueue::Unlink(Waiter& waiter) {
  Level& level = levels_[static_cast<std::size_t>(waiter.priority)];
  level.line.erase(level.line.iterator_to(waiter));
  --level.waiting;
  --total_;
  const auto flow = flows_.find(waiter.flow);
  // A flow with nobody waiting is forgotten; its next waiter starts from
  // the virtual time, which its served tags never passed.
  if (--flow->second.waiting == 0) flows_.erase(flow);
}

}  // namespace tollgate::gateway
