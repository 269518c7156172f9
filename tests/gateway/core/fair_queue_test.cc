#include "gateway/core/fair_queue.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <vector>

namespace tollgate::gateway {
namespace {

using Waiter = FairQueue::Waiter;

// Waiters kept at stable addresses for a test.
struct Pool {
  std::deque<Waiter> waiters;
  Waiter& Make(std::uint64_t flow, std::uint32_t weight = 1,
               Priority priority = Priority::kNormal) {
    Waiter& w = waiters.emplace_back();
    w.flow = flow;
    w.weight = weight;
    w.priority = priority;
    return w;
  }
};

FairQueue::Pushed PushOne(FairQueue& queue, Waiter& waiter) {
  Waiter* shed = nullptr;
  const FairQueue::Pushed pushed = queue.Push(waiter, shed);
  EXPECT_EQ(shed, nullptr);
  return pushed;
}

TEST(FairQueueTest, EachFlowIsFirstComeFirstServed) {
  Pool pool;
  FairQueue queue({});
  std::vector<Waiter*> order;
  for (int i = 0; i < 5; ++i) {
    order.push_back(&pool.Make(7));
    PushOne(queue, *order.back());
  }
  for (Waiter* expected : order) EXPECT_EQ(queue.Pop(), expected);
  EXPECT_EQ(queue.Pop(), nullptr);
  EXPECT_EQ(queue.flows(), 0u);
}

// One flow keeps `heavy_backlog` waiting; each of `light` flows keeps one
// and sends its next as soon as one is served. Returns the places each
// flow got out of `places`, and the longest a light waiter waited (in
// places given meanwhile).
struct Shares {
  std::map<std::uint64_t, int> got;
  int longest_light_wait = 0;
};
Shares Saturate(int light, int heavy_backlog, int places) {
  Pool pool;
  FairQueue queue({.max_per_flow = 1000, .max_total = 10'000});
  std::map<const Waiter*, int> queued_at;
  int given = 0;
  auto push = [&](std::uint64_t flow) {
    Waiter& w = pool.Make(flow);
    PushOne(queue, w);
    queued_at[&w] = given;
  };
  for (int i = 0; i < heavy_backlog; ++i) push(0);
  for (int f = 1; f <= light; ++f) push(static_cast<std::uint64_t>(f));
  Shares shares;
  for (given = 0; given < places;) {
    Waiter* w = queue.Pop();
    ++given;
    ++shares.got[w->flow];
    if (w->flow != 0) {
      shares.longest_light_wait = std::max(shares.longest_light_wait, given - queued_at[w]);
    }
    push(w->flow);  // every flow sends again at once: all stay saturated
  }
  return shares;
}

TEST(FairQueueTest, AHeavyFlowGetsItsFairShareAndNoMore) {
  // 50 waiting against 1 for each of nine others: a tenth of the places
  // each, within one place per round.
  Shares shares = Saturate(9, 50, 1000);
  EXPECT_LE(shares.got[0], 100 + 10);
  for (std::uint64_t f = 1; f <= 9; ++f) EXPECT_GE(shares.got[f], 100 - 10) << f;
  // A light flow's waiter waits for one round at most.
  EXPECT_LE(shares.longest_light_wait, 11);
}

TEST(FairQueueTest, WeightsSetTheShares) {
  Pool pool;
  FairQueue queue({.max_per_flow = 1000, .max_total = 10'000});
  for (int i = 0; i < 500; ++i) {
    PushOne(queue, pool.Make(1, 4));
    PushOne(queue, pool.Make(2, 1));
  }
  std::map<std::uint64_t, int> got;
  for (int i = 0; i < 500; ++i) ++got[queue.Pop()->flow];
  EXPECT_NEAR(got[1], 400, 2);
  EXPECT_NEAR(got[2], 100, 2);
}

TEST(FairQueueTest, HigherPriorityGoesFirst) {
  Pool pool;
  FairQueue queue({});
  Waiter& low = pool.Make(1, 1, Priority::kLow);
  Waiter& normal = pool.Make(2, 1, Priority::kNormal);
  Waiter& high = pool.Make(3, 1, Priority::kHigh);
  PushOne(queue, low);
  PushOne(queue, normal);
  PushOne(queue, high);
  EXPECT_EQ(queue.Pop(), &high);
  EXPECT_EQ(queue.Pop(), &normal);
  EXPECT_EQ(queue.Pop(), &low);
}

TEST(FairQueueTest, AFullRoomShedsLowerPriorityFirst) {
  Pool pool;
  FairQueue queue({.max_per_flow = 10, .max_total = 3});
  Waiter& low_old = pool.Make(1, 1, Priority::kLow);
  Waiter& low_new = pool.Make(1, 1, Priority::kLow);
  Waiter& normal = pool.Make(2, 1, Priority::kNormal);
  PushOne(queue, low_old);
  PushOne(queue, low_new);
  PushOne(queue, normal);
  // Full: another normal pushes out the low waiter that would wait longest.
  Waiter& normal2 = pool.Make(3, 1, Priority::kNormal);
  Waiter* shed = nullptr;
  EXPECT_EQ(queue.Push(normal2, shed), FairQueue::Pushed::kQueued);
  EXPECT_EQ(shed, &low_new);
  EXPECT_FALSE(FairQueue::queued(low_new));
  // Low never pushes anyone out; nor does a level push out its own.
  Waiter& low3 = pool.Make(4, 1, Priority::kLow);
  EXPECT_EQ(queue.Push(low3, shed), FairQueue::Pushed::kRoomFull);
  EXPECT_EQ(shed, nullptr);
  Waiter& normal3 = pool.Make(5, 1, Priority::kNormal);
  EXPECT_EQ(queue.Push(normal3, shed), FairQueue::Pushed::kQueued);
  EXPECT_EQ(shed, &low_old);
  Waiter& normal4 = pool.Make(6, 1, Priority::kNormal);
  EXPECT_EQ(queue.Push(normal4, shed), FairQueue::Pushed::kRoomFull);
  EXPECT_EQ(queue.size(), 3u);
}

TEST(FairQueueTest, EachFlowIsBounded) {
  Pool pool;
  FairQueue queue({.max_per_flow = 2, .max_total = 100});
  EXPECT_EQ(PushOne(queue, pool.Make(1)), FairQueue::Pushed::kQueued);
  EXPECT_EQ(PushOne(queue, pool.Make(1)), FairQueue::Pushed::kQueued);
  EXPECT_EQ(PushOne(queue, pool.Make(1)), FairQueue::Pushed::kFlowFull);
  EXPECT_EQ(PushOne(queue, pool.Make(2)), FairQueue::Pushed::kQueued);
  EXPECT_EQ(queue.waiting(1), 2u);
}

TEST(FairQueueTest, AWaiterThatLeavesIsNeverServed) {
  Pool pool;
  FairQueue queue({});
  Waiter& a = pool.Make(1);
  Waiter& b = pool.Make(2);
  Waiter& c = pool.Make(1);
  PushOne(queue, a);
  PushOne(queue, b);
  PushOne(queue, c);
  queue.Remove(b);
  queue.Remove(b);  // twice: nothing
  EXPECT_EQ(queue.size(), 2u);
  EXPECT_EQ(queue.waiting(2), 0u);
  EXPECT_EQ(queue.Pop(), &a);
  EXPECT_EQ(queue.Pop(), &c);
  EXPECT_EQ(queue.Pop(), nullptr);
}

TEST(FairQueueTest, MemoryFollowsWaitersNotTenants) {
  Pool pool;
  FairQueue queue({.max_per_flow = 10, .max_total = 1000});
  int refused = 0;
  for (std::uint64_t tenant = 0; tenant < 100'000; ++tenant) {
    Waiter* shed = nullptr;
    if (queue.Push(pool.Make(tenant), shed) == FairQueue::Pushed::kRoomFull) ++refused;
  }
  EXPECT_EQ(queue.size(), 1000u);
  EXPECT_EQ(queue.flows(), 1000u);
  EXPECT_EQ(refused, 99'000);
  while (queue.Pop() != nullptr) {
  }
  EXPECT_EQ(queue.flows(), 0u);
}

}  // namespace
}  // namespace tollgate::gateway
