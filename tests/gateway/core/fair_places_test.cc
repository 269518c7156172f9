#include "gateway/core/fair_places.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace tollgate::gateway {
namespace {

const FairQueueParams kParams{.max_per_flow = 1000, .max_total = 10'000};

// A waiter that records when it was told, in the order it was told.
struct RecordingWaiter final : FairPlaces::Waiter {
  std::vector<const RecordingWaiter*>* told = nullptr;
  int notified = 0;
  void Notify() override {
    ++notified;
    if (told != nullptr) told->push_back(this);
  }
};

TEST(FairPlacesTest, AGivenBackPlaceGoesToTheFairNextWaiter) {
  FairPlaces places;
  std::vector<const RecordingWaiter*> told;
  auto first = places.TryAcquire("up", 1);
  ASSERT_TRUE(first);
  EXPECT_FALSE(places.TryAcquire("up", 1));
  // Flow 1 queues three, flow 2 one: flow 2's goes second, not last.
  std::deque<RecordingWaiter> waiters(4);
  const std::uint64_t flows[] = {1, 1, 1, 2};
  for (int i = 0; i < 4; ++i) {
    waiters[i].flow = flows[i];
    waiters[i].told = &told;
    ASSERT_EQ(places.Enqueue("up", 1, waiters[i], kParams), FairQueue::Pushed::kQueued);
  }
  EXPECT_TRUE(told.empty());
  first.reset();  // given back: handed on, never free
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0], &waiters[0]);
  EXPECT_EQ(places.held("up"), 1);
  // A newcomer does not take a place while others wait.
  EXPECT_FALSE(places.TryAcquire("up", 1));
  waiters[0].place.reset();
  ASSERT_EQ(told.size(), 2u);
  EXPECT_EQ(told[1], &waiters[3]);
  waiters[3].place.reset();
  waiters[1].place.reset();
  waiters[2].place.reset();
  EXPECT_EQ(places.held("up"), 0);
  EXPECT_EQ(places.keys(), 0u);
}

TEST(FairPlacesTest, ALeaverIsSkippedAndAGrantedLeaverKeepsItsPlace) {
  FairPlaces places;
  auto held = places.TryAcquire("up", 1);
  RecordingWaiter a, b;
  a.flow = 1;
  b.flow = 2;
  places.Enqueue("up", 1, a, kParams);
  places.Enqueue("up", 1, b, kParams);
  EXPECT_FALSE(places.Leave(a));  // gave up before its turn
  held.reset();
  EXPECT_EQ(b.notified, 1);
  EXPECT_TRUE(places.Leave(b));  // its deadline raced the grant: the place is its
  ASSERT_TRUE(b.place);
  b.place.reset();
  EXPECT_EQ(places.keys(), 0u);
}

TEST(FairPlacesTest, ARaisedLimitGrantsWaiters) {
  FairPlaces places;
  auto held = places.TryAcquire("up", 1);
  std::deque<RecordingWaiter> waiters(3);
  for (auto& w : waiters) places.Enqueue("up", 1, w, kParams);
  places.SetLimit("up", 3);
  EXPECT_EQ(waiters[0].notified, 1);
  EXPECT_EQ(waiters[1].notified, 1);
  EXPECT_EQ(waiters[2].notified, 0);
  EXPECT_EQ(places.held("up"), 3);
  for (auto& w : waiters) places.Leave(w);
}

TEST(FairPlacesTest, AHigherPriorityNewcomerPushesOutALowWaiter) {
  FairPlaces places;
  const FairQueueParams one{.max_per_flow = 10, .max_total = 1};
  auto held = places.TryAcquire("up", 1);
  RecordingWaiter low, high;
  low.priority = Priority::kLow;
  high.priority = Priority::kHigh;
  ASSERT_EQ(places.Enqueue("up", 1, low, one), FairQueue::Pushed::kQueued);
  ASSERT_EQ(places.Enqueue("up", 1, high, one), FairQueue::Pushed::kQueued);
  EXPECT_EQ(low.notified, 1);
  EXPECT_FALSE(low.place);  // told, without a place: refused
  EXPECT_FALSE(places.Leave(low));
  held.reset();
  EXPECT_TRUE(high.place);
}

// Threads take places directly or by waiting; never more than the limit
// are held, and every waiter is served.
TEST(FairPlacesTest, ThreadsNeverHoldMoreThanTheLimit) {
  FairPlaces places;
  constexpr std::int64_t kLimit = 3;
  std::atomic<int> in_use{0};
  std::atomic<int> most{0};
  std::atomic<int> served{0};
  struct ThreadWaiter final : FairPlaces::Waiter {
    std::mutex mutex;
    std::condition_variable cv;
    bool told = false;
    void Notify() override {
      std::lock_guard lock(mutex);
      told = true;
      cv.notify_one();
    }
  };
  auto use = [&](std::optional<FairPlaces::Place> place) {
    const int now = ++in_use;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::yield();
    --in_use;
    place.reset();
    ++served;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        if (auto place = places.TryAcquire("up", kLimit)) {
          use(std::move(place));
          continue;
        }
        ThreadWaiter w;
        w.flow = static_cast<std::uint64_t>(t);
        ASSERT_EQ(places.Enqueue("up", kLimit, w, kParams), FairQueue::Pushed::kQueued);
        std::unique_lock lock(w.mutex);
        w.cv.wait(lock, [&] { return w.told; });
        lock.unlock();
        use(std::move(w.place));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(served.load(), 2000);
  EXPECT_LE(most.load(), kLimit);
  EXPECT_EQ(places.keys(), 0u);
}

}  // namespace
}  // namespace tollgate::gateway
