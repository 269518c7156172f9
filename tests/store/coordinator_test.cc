// The upstream-protection state on both coordinators: one generated sequence
// of learned-limit checks and lessons, place acquisitions and releases, and
// waiting-line entries runs against LocalCoordinator and against
// RedisCoordinator on a real redis-server, step by step, and must give the
// same answers (waits derived from expiries within a few ms: Redis counts
// them on its own clock).
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <random>

#include "redis_server.h"
#include "store/redis_coordinator.h"
#include "store_sinks.h"

namespace tollgate::store {
namespace {

using testing::RedisServer;

std::int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class CoordinatorConformance : public ::testing::Test {
 protected:
  CoordinatorConformance() {
    std::string error;
    RedisOptions o;
    o.address = *ParseRedisUrl(redis_.url(), error);
    o.timeout_ms = 1000;
    o.inflight_ttl_ms = 60'000;
    bool fatal = false;
    EXPECT_EQ(CheckRedis(o, fatal), std::nullopt);
    store_ = std::make_unique<RedisStore>(io_, o, health_);
    remote_ = std::make_unique<RedisCoordinator>(*store_);
  }
  ~CoordinatorConformance() override {
    remote_.reset();
    store_.reset();
  }
  CountResult Wait(Answer& a) {
    while (!a.done) io_.run_one();
    return a.result;
  }
  // Lets fire-and-forget commands reach Redis before the next step.
  void Flush() {
    Answer a;
    remote_->CheckLearned("flush", "flush", 0, a);
    Wait(a);
  }

  RedisServer redis_;
  boost::asio::io_context io_;
  RedisHealth health_;
  std::unique_ptr<RedisStore> store_;
  std::unique_ptr<RedisCoordinator> remote_;
  LocalCoordinator local_;
};

TEST_F(CoordinatorConformance, LearnedLimitsDecideAlike) {
  std::mt19937 random(7);
  const char* upstreams[] = {"partner", "other"};
  const char* buckets[] = {"/a", "/b/{id}", "r\x1fz"};
  int waits = 0;
  for (int step = 0; step < 400; ++step) {
    const char* upstream = upstreams[random() % 2];
    const char* bucket = buckets[random() % 3];
    if (random() % 3 == 0) {
      algorithms::LearnedFacts facts;
      facts.limit = random() % 4 == 0 ? -1 : static_cast<std::int64_t>(1 + random() % 5);
      facts.reset_after_ms =
          random() % 3 == 0 ? -1 : static_cast<std::int64_t>(5000 + random() % 5000);
      facts.limited = random() % 8 == 0;
      facts.global = facts.limited && random() % 4 == 0;
      if (facts.limited && random() % 2 == 0)
        facts.retry_after_ms = static_cast<std::int64_t>(3000 + random() % 3000);
      const std::int64_t now = SteadyMs();
      local_.Learn(upstream, bucket, facts, now);
      remote_->Learn(upstream, bucket, facts, now);
      Flush();
      continue;
    }
    Answer l, r;
    local_.CheckLearned(upstream, bucket, SteadyMs(), l);
    remote_->CheckLearned(upstream, bucket, SteadyMs(), r);
    const CountResult lr = Wait(l), rr = Wait(r);
    ASSERT_EQ(rr.status, StoreStatus::kOk);
    if (lr.value == 0) {
      ASSERT_EQ(rr.value, 0) << "step " << step;
    } else {
      ++waits;
      ASSERT_NEAR(static_cast<double>(rr.value), static_cast<double>(lr.value), 30)
          << "step " << step;
    }
  }
  EXPECT_GT(waits, 50);  // the sequence reached the waiting branches
}

TEST_F(CoordinatorConformance, PlacesAndLinesCountAlike) {
  std::mt19937 random(11);
  std::vector<InflightGuard> local_held, remote_held;
  std::vector<InflightGuard> local_lines, remote_lines;
  for (int step = 0; step < 300; ++step) {
    const std::string key = std::string("rule\x1f") + static_cast<char>('a' + random() % 2);
    const auto op = random() % 4;
    if (op == 0 && !local_held.empty()) {
      const std::size_t i = random() % local_held.size();
      local_held.erase(local_held.begin() + static_cast<std::ptrdiff_t>(i));
      remote_held.erase(remote_held.begin() + static_cast<std::ptrdiff_t>(i));
      Flush();
    } else if (op == 1) {
      InflightGuard l, r;
      Answer la, ra;
      local_.EnterQueue(key, 60'000, l, la);
      remote_->EnterQueue(key, 60'000, r, ra);
      ASSERT_EQ(Wait(ra).value, Wait(la).value) << "step " << step;
      local_lines.push_back(std::move(l));
      remote_lines.push_back(std::move(r));
    } else if (op == 2 && !local_lines.empty()) {
      local_lines.pop_back();
      remote_lines.pop_back();
      Flush();
    } else {
      InflightGuard l, r;
      Answer la, ra;
      local_.AcquirePlace(key, 3, SteadyMs(), l, la);
      remote_->AcquirePlace(key, 3, SteadyMs(), r, ra);
      const CountResult lr = Wait(la), rr = Wait(ra);
      ASSERT_EQ(rr.status, StoreStatus::kOk);
      ASSERT_EQ(rr.value, lr.value) << "step " << step;
      ASSERT_EQ(r.held(), l.held());
      if (lr.value == 1) {
        local_held.push_back(std::move(l));
        remote_held.push_back(std::move(r));
      }
    }
  }
  local_held.clear();
  remote_held.clear();
  local_lines.clear();
  remote_lines.clear();
  Flush();
  EXPECT_EQ(local_.places().KeyCount(), 0u);
  EXPECT_EQ(redis_.Command({"KEYS", "*inflight"}), "");  // empty sets are deleted
}

}  // namespace
}  // namespace tollgate::store
