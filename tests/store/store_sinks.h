// What the store tests share: sinks that keep a store's one answer, and a
// fixed-window limit to ask about.
#pragma once

#include <cstdint>

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

inline LimitSpec FixedWindow(std::int64_t limit, std::int64_t window_ms) {
  algorithms::LimitParams p;
  p.algorithm = algorithms::Algorithm::kFixedWindow;
  p.limit = limit;
  p.window_ms = window_ms;
  return LimitSpec::Make({p});
}

}  // namespace tollgate::store
