#include "store/due_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace tollgate::store {
namespace {

TEST(DueQueue, EmptyHasNoTop) {
  DueQueue<int> queue;
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.Top(), nullptr);
}

TEST(DueQueue, AnEarlierTimeAfterLaterOnesComesFirst) {
  DueQueue<int> queue;
  queue.Push(100, 1);
  queue.Push(200, 2);
  queue.Push(50, 3);   // behind the back: the heap
  queue.Push(200, 4);  // equal to the back: in order, after 2
  std::vector<int> order;
  while (const auto* top = queue.Top()) {
    order.push_back(top->value);
    queue.Pop();
  }
  EXPECT_EQ(order, (std::vector<int>{3, 1, 2, 4}));
  EXPECT_TRUE(queue.empty());
}

TEST(DueQueue, PopsInTimeOrderWhateverThePushOrder) {
  std::mt19937 random(7);
  DueQueue<std::int64_t> queue;
  std::vector<std::int64_t> times;
  std::int64_t now = 0;
  for (int i = 0; i < 2000; ++i) {
    // Mostly now + a fixed ttl, sometimes earlier; pops in between.
    now += random() % 3;
    const std::int64_t at = random() % 5 == 0 ? now + random() % 50 : now + 100;
    queue.Push(at, at);
    times.push_back(at);
    if (random() % 4 == 0) {
      const auto* top = queue.Top();
      ASSERT_NE(top, nullptr);
      const auto earliest = std::min_element(times.begin(), times.end());
      EXPECT_EQ(top->at, *earliest);
      times.erase(earliest);
      queue.Pop();
    }
  }
  ASSERT_EQ(queue.size(), times.size());
  std::sort(times.begin(), times.end());
  for (const std::int64_t at : times) {
    ASSERT_EQ(queue.Top()->at, at);
    queue.Pop();
  }
  EXPECT_TRUE(queue.empty());
}

}  // namespace
}  // namespace tollgate::store
