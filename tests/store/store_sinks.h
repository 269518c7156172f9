// What the store tests share: sinks that keep a store's one answer, and
// limits to ask about.
#pragma once

#include <cstdint>

#include "store/redis_store.h"
#include "store/store.h"

namespace tollgate::store {

// Keeps the answer of one Decide().
struct Result final : DecisionSink {
  StoreResult result;
  bool done = false;
  void OnDecision(const StoreResult& r) override {
    result = r;
    done = true;
  }
};

// Keeps the answer of one Coordinator call.
struct Answer final : CountSink {
  CountResult result;
  bool done = false;
  void OnCount(const CountResult& r) override {
    result = r;
    done = true;
  }
};

// Keeps the answer of one RedisStore::Inspect().
struct Values final : ValuesSink {
  ValuesResult result;
  bool done = false;
  void OnValues(const ValuesResult& r) override {
    result = r;
    done = true;
  }
};

// One window of a limit.
inline algorithms::LimitParams Window(algorithms::Algorithm algorithm, std::int64_t limit,
                                      std::int64_t window_ms, std::int64_t burst = 0) {
  algorithms::LimitParams p;
  p.algorithm = algorithm;
  p.limit = limit;
  p.window_ms = window_ms;
  p.burst = burst;
  return p;
}

inline LimitSpec FixedWindow(std::int64_t limit, std::int64_t window_ms) {
  return LimitSpec::Make({Window(algorithms::Algorithm::kFixedWindow, limit, window_ms)});
}

inline LimitSpec TokenBucket(std::int64_t limit, std::int64_t window_ms, std::int64_t burst) {
  return LimitSpec::Make({Window(algorithms::Algorithm::kTokenBucket, limit, window_ms, burst)});
}

}  // namespace tollgate::store
