// The order in which waiting requests get a place (an upstream connection,
// a `max_inflight` place, a delayed rule's turn): fair between flows
// (tenants) instead of first come, first served.
//  - Self-clocked fair queueing: a waiter's finish tag is its flow's
//    previous tag (or the level's virtual time, if later) plus 1 / weight;
//    the smallest tag goes next and sets the virtual time. A flow that keeps
//    fifty waiting gets one turn for every turn of a flow that keeps one,
//    and a flow of weight 4 four turns for another's one. Tags only grow
//    within a flow, so each flow is first come, first served.
//  - Three priority levels: a place goes to the highest level that waits;
//    when the room is full, a newcomer may push out the waiter of a lower
//    level that would have waited longest (the largest tag), never one of
//    its own level or a higher one.
//  - At most `max_per_flow` waiters per flow and `max_total` in all. A
//    flow's state exists only while it has waiters, so memory follows the
//    waiters, bounded by `max_total`, never the number of flows seen
//    (which is what Kubernetes' priority and fairness uses shuffle
//    sharding for; a tag per flow also makes shares exact, where a flow
//    spread over a hand of shared queues gets up to a hand's worth).
//
// Waiters are owned by the caller (the waiting request) and linked in
// place (Boost.Intrusive: no allocation per waiter); a waiter that leaves
// (its client went away, its deadline passed) is taken out with Remove,
// which its owner calls before destroying it.
// Not thread-safe: the owner serializes calls.
#pragma once

#include <array>
#include <boost/intrusive/set.hpp>
#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "rules/priority.h"

namespace tollgate::gateway {

using rules::kPriorityLevels;
using rules::Priority;

// Who a waiting request is in the fair order: its flow (a hash of its
// client or of a rule's fair_key), its weight and its priority.
struct WaitClass {
  std::uint64_t flow = 0;
  std::uint32_t weight = 1;
  Priority priority = Priority::kNormal;
};

struct FairQueueParams {
  std::size_t max_per_flow = 100;
  std::size_t max_total = 10'000;
};

class FairQueue {
 public:
  // A waiting request. Set flow, weight and priority before Push; the
  // rest is the queue's. Must stay at one address while queued.
  class Waiter {
   public:
    std::uint64_t flow = 0;  // a hash of the flow's key
    std::uint32_t weight = 1;
    Priority priority = Priority::kNormal;
    void Classify(const WaitClass& c) {
      flow = c.flow;
      weight = c.weight;
      priority = c.priority;
    }

   private:
    friend class FairQueue;
    boost::intrusive::set_member_hook<> hook_;  // safe mode: Remove before destruction
    double finish_ = 0;
    std::uint64_t order_ = 0;  // arrival, to order equal tags
  };

  enum class Pushed { kQueued, kFlowFull, kRoomFull };

  explicit FairQueue(const FairQueueParams& params) : params_(params) {}
  // New bounds, for the pushes from now on (the waiters stay).
  void set_params(const FairQueueParams& params) { params_ = params; }
  FairQueue(const FairQueue&) = delete;
  FairQueue& operator=(const FairQueue&) = delete;
  ~FairQueue();

  // Queues `waiter`. When the room is full and a lower level waits, that
  // level's waiter with the largest tag is taken out to make room and
  // returned in `shed` (the caller refuses it); otherwise `shed` is null.
  Pushed Push(Waiter& waiter, Waiter*& shed);
  // The waiter that gets the next place, taken out; null when none waits.
  Waiter* Pop();
  // Takes a queued waiter out (nothing if it is not queued).
  void Remove(Waiter& waiter);

  // How many queued waiters Pop would give out before `waiter` (queued),
  // counted up to `cap`.
  std::size_t Ahead(const Waiter& waiter, std::size_t cap) const;

  std::size_t size() const { return total_; }
  std::size_t waiting(std::uint64_t flow) const;
  std::size_t flows() const { return flows_.size(); }
  static bool queued(const Waiter& waiter) { return waiter.hook_.is_linked(); }

 private:
  struct ByTag {
    bool operator()(const Waiter& a, const Waiter& b) const {
      return a.finish_ != b.finish_ ? a.finish_ < b.finish_ : a.order_ < b.order_;
    }
  };
  using Hook = boost::intrusive::member_hook<Waiter, boost::intrusive::set_member_hook<>,
                                            &Waiter::hook_>;
  using Line = boost::intrusive::multiset<Waiter, Hook, boost::intrusive::compare<ByTag>>;
  struct Level {
    Line line;
    double virtual_time = 0;
    std::size_t waiting = 0;
  };
  struct Flow {
    std::size_t waiting = 0;
    double last_finish = 0;
  };

  void Unlink(Waiter& waiter);

  FairQueueParams params_;
  std::array<Level, kPriorityLevels> levels_;
  std::unordered_map<std::uint64_t, Flow> flows_;
  std::size_t total_ = 0;
  std::uint64_t arrivals_ = 0;
};

}  // namespace tollgate::gateway
