#include "gateway/core/waiting_room.h"

#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace tollgate::gateway {
namespace {

const WaitingRoom::Bounds kBounds{.max_per_key = 1000, .max_per_flow = 1000};

// A waiter that records when it was told, in the order it was told.
struct RecordingWaiter final : WaitingRoom::Waiter {
  std::vector<const RecordingWaiter*>* told = nullptr;
  int notified = 0;
  void Notify() override {
    ++notified;
    if (told != nullptr) told->push_back(this);
  }
};

WaitingRoom::Entered Enter(WaitingRoom& room, RecordingWaiter& w, std::uint64_t flow,
                           const WaitingRoom::Bounds& bounds = kBounds, const char* key = "k") {
  w.flow = flow;
  return room.Enter(key, bounds, w);
}

TEST(WaitingRoomTest, TheTurnPassesInTheFairOrder) {
  WaitingRoom room(100);
  std::vector<const RecordingWaiter*> told;
  std::deque<RecordingWaiter> w(5);
  for (auto& x : w) x.told = &told;
  // The first has the turn at once; flow 1 then queues three, flow 2 one.
  EXPECT_EQ(Enter(room, w[0], 1), WaitingRoom::Entered::kTurn);
  EXPECT_EQ(Enter(room, w[1], 1), WaitingRoom::Entered::kQueued);
  EXPECT_EQ(Enter(room, w[2], 1), WaitingRoom::Entered::kQueued);
  EXPECT_EQ(Enter(room, w[3], 1), WaitingRoom::Entered::kQueued);
  std::size_t ahead = 0;
  w[4].flow = 2;
  EXPECT_EQ(room.Enter("k", kBounds, w[4], &ahead), WaitingRoom::Entered::kQueued);
  EXPECT_EQ(ahead, 2u);  // the head, and flow 1's first waiter
  EXPECT_TRUE(told.empty());
  EXPECT_EQ(room.StatusOf(w[1]), WaitingRoom::Status::kWaiting);
  // Each Done passes the turn on: 1, 2's one, then flow 1's others.
  for (const RecordingWaiter* next : {&w[1], &w[4], &w[2], &w[3]}) {
    const RecordingWaiter* head = told.empty() ? &w[0] : told.back();
    room.Done(const_cast<RecordingWaiter&>(*head));
    ASSERT_EQ(told.back(), next);
    EXPECT_EQ(room.StatusOf(*next), WaitingRoom::Status::kTurn);
  }
  room.Done(w[3]);
  EXPECT_EQ(room.waiting(), 0u);
  EXPECT_EQ(room.lines(), 0u);
}

TEST(WaitingRoomTest, AGivenBackPlaceWakesOnlyTheHead) {
  WaitingRoom room(100);
  RecordingWaiter head;
  RecordingWaiter behind;
  Enter(room, head, 1);
  Enter(room, behind, 2);
  EXPECT_FALSE(room.TakeWake(head));
  room.Wake("k");
  EXPECT_EQ(head.notified, 1);
  EXPECT_EQ(behind.notified, 0);
  EXPECT_TRUE(room.TakeWake(head));
  EXPECT_FALSE(room.TakeWake(head));
  room.Wake("other key");  // nobody waits there: nothing
  EXPECT_EQ(head.notified, 1);
  // A leaver behind is skipped; Done is idempotent.
  room.Done(behind);
  room.Done(behind);
  EXPECT_EQ(room.waiting("k"), 1u);
  room.Done(head);
  EXPECT_EQ(behind.notified, 0);
  EXPECT_EQ(room.waiting(), 0u);
}

TEST(WaitingRoomTest, LinesFlowsAndTheRoomAreBounded) {
  WaitingRoom room(4);
  std::deque<RecordingWaiter> w(8);
  const WaitingRoom::Bounds bounds{.max_per_key = 3, .max_per_flow = 1};
  EXPECT_EQ(Enter(room, w[0], 1, bounds), WaitingRoom::Entered::kTurn);
  EXPECT_EQ(Enter(room, w[1], 1, bounds), WaitingRoom::Entered::kQueued);
  // Flow 1 already has one waiting in line.
  EXPECT_EQ(Enter(room, w[2], 1, bounds), WaitingRoom::Entered::kRefused);
  EXPECT_EQ(Enter(room, w[3], 2, bounds), WaitingRoom::Entered::kQueued);
  // The line holds three.
  EXPECT_EQ(Enter(room, w[4], 3, bounds), WaitingRoom::Entered::kRefused);
  // Another key's line: one more fits in the room of four, then none.
  EXPECT_EQ(Enter(room, w[5], 1, bounds, "other"), WaitingRoom::Entered::kTurn);
  EXPECT_EQ(Enter(room, w[6], 2, bounds, "other"), WaitingRoom::Entered::kRefused);
  EXPECT_EQ(Enter(room, w[7], 2, bounds, "third"), WaitingRoom::Entered::kRefused);
  EXPECT_EQ(room.waiting(), 4u);
  for (auto& x : w) room.Done(x);
  EXPECT_EQ(room.waiting(), 0u);
  EXPECT_EQ(room.lines(), 0u);
}

TEST(WaitingRoomTest, AFullRoomPushesOutALowerPriorityWaiter) {
  WaitingRoom room(2);
  RecordingWaiter head;
  RecordingWaiter low;
  RecordingWaiter high;
  Enter(room, head, 1);
  low.priority = rules::Priority::kLow;
  Enter(room, low, 2);
  high.priority = rules::Priority::kHigh;
  EXPECT_EQ(Enter(room, high, 3), WaitingRoom::Entered::kQueued);
  EXPECT_EQ(low.notified, 1);
  EXPECT_EQ(room.StatusOf(low), WaitingRoom::Status::kShed);
  room.Done(low);
  EXPECT_EQ(room.waiting(), 2u);
  room.Done(head);
  EXPECT_EQ(room.StatusOf(high), WaitingRoom::Status::kTurn);
  room.Done(high);
  EXPECT_EQ(room.waiting(), 0u);
}

// Memory follows the waiters, never the tenants: 100k tenants, each in a
// line of its own key and flow, in a room of 1,000.
TEST(WaitingRoomTest, MemoryFollowsWaitersNotTenants) {
  WaitingRoom room(1000);
  std::deque<RecordingWaiter> w(100'000);
  int refused = 0;
  for (std::size_t tenant = 0; tenant < w.size(); ++tenant) {
    const std::string key = "tenant" + std::to_string(tenant % 10);
    if (Enter(room, w[tenant], tenant, kBounds, key.c_str()) == WaitingRoom::Entered::kRefused) {
      ++refused;
    }
  }
  EXPECT_EQ(room.waiting(), 1000u);
  EXPECT_EQ(room.lines(), 10u);
  EXPECT_EQ(refused, 99'000);
  for (auto& x : w) room.Done(x);
  EXPECT_EQ(room.lines(), 0u);
}

// Threads enter, take their turn and leave: every turn is given exactly
// once, to one waiter at a time.
TEST(WaitingRoomTest, OneTurnAtATimeAcrossThreads) {
  WaitingRoom room(10'000);
  std::atomic<int> holding{0};
  std::atomic<int> most{0};
  std::atomic<int> served{0};
  struct Waiter final : WaitingRoom::Waiter {
    std::atomic<bool> told{false};
    void Notify() override { told = true; }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        Waiter w;
        w.flow = static_cast<std::uint64_t>(t);
        if (room.Enter("k", kBounds, w) == WaitingRoom::Entered::kQueued) {
          while (room.StatusOf(w) != WaitingRoom::Status::kTurn) std::this_thread::yield();
        }
        const int now = ++holding;
        int seen = most;
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        --holding;
        ++served;
        room.Done(w);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(served, 2000);
  EXPECT_EQ(most, 1);
  EXPECT_EQ(room.waiting(), 0u);
}

}  // namespace
}  // namespace tollgate::gateway
