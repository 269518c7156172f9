#include "store/coordinator.h"

#include <limits>

namespace tollgate::store {

void LocalCoordinator::CheckLearned(std::string_view upstream, std::string_view bucket,
                                    std::int64_t now_ms, CountSink& sink) {
  sink.OnCount({StoreStatus::kOk, learned_.Check(upstream, bucket, now_ms)});
}

void LocalCoordinator::Learn(std::string_view upstream, std::string_view bucket,
                             const algorithms::LearnedFacts& facts, std::int64_t now_ms) {
  learned_.Learn(upstream, bucket, facts, now_ms);
}

void LocalCoordinator::AcquirePlace(std::string_view key, std::int64_t max, std::int64_t,
                                    InflightGuard& place, CountSink& sink) {
  std::optional<InflightGuard> got = places_.TryAcquire(key, max);
  if (got) place = std::move(*got);
  sink.OnCount({StoreStatus::kOk, got ? 1 : 0});
}

void LocalCoordinator::EnterQueue(std::string_view key, std::int64_t, InflightGuard& ticket,
                                  CountSink& sink) {
  // Unbounded here: WaitingRoom bounds the requests a process holds.
  std::int64_t before = 0;
  std::optional<InflightGuard> got =
      queues_.TryAcquire(key, std::numeric_limits<std::int64_t>::max(), before);
  ticket = std::move(*got);
  sink.OnCount({StoreStatus::kOk, before});
}

}  // namespace tollgate::store
