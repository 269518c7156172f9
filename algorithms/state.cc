#include "algorithms/state.h"

#include <cstring>
#include <new>

namespace tollgate::algorithms {
namespace {

std::int64_t FloorDivide(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

std::size_t StateSize(const LimitParams& params) {
  switch (params.algorithm) {
    case Algorithm::kTokenBucket:
    case Algorithm::kLeakyBucket:
      return sizeof(BucketState);
    case Algorithm::kFixedWindow:
      return sizeof(FixedWindowState);
    case Algorithm::kTwoBucket:
      return sizeof(TwoBucketState);
    case Algorithm::kSubWindow: {
      const std::size_t bytes =
          sizeof(SubWindowState) +
          static_cast<std::size_t>(params.sub_windows) * SubWindowCountBytes(params);
      return (bytes + 7) & ~std::size_t{7};
    }
    case Algorithm::kSlidingLog:
      return sizeof(SlidingLogState);
  }
  return 0;
}

void InitState(const LimitParams& params, std::byte* state, std::int64_t now_ms) {
  switch (params.algorithm) {
    case Algorithm::kTokenBucket:
      new (state) BucketState{params.burst * params.window_ms, now_ms};
      return;
    case Algorithm::kLeakyBucket:
      new (state) BucketState{0, now_ms};
      return;
    case Algorithm::kFixedWindow:
      new (state) FixedWindowState{FloorDivide(now_ms, params.window_ms), 0};
      return;
    case Algorithm::kTwoBucket:
      new (state) TwoBucketState{FloorDivide(now_ms, params.window_ms), 0, 0};
      return;
    case Algorithm::kSubWindow: {
      const std::int64_t sub_ms = params.window_ms / params.sub_windows;
      new (state) SubWindowState{FloorDivide(now_ms, sub_ms)};
      std::memset(state + sizeof(SubWindowState), 0,
                  static_cast<std::size_t>(params.sub_windows) * SubWindowCountBytes(params));
      return;
    }
    case Algorithm::kSlidingLog:
      new (state) SlidingLogState{{0, 0}, nullptr};
      return;
  }
}

void DestroyState(Algorithm algorithm, std::byte* state) {
  if (algorithm == Algorithm::kSlidingLog) {
    delete std::launder(reinterpret_cast<SlidingLogState*>(state))->log;
  }
}

OwnedState::OwnedState(std::span<const LimitParams> windows, std::int64_t now_ms)
    : params_(windows.begin(), windows.end()) {
  std::size_t words = 0;
  for (const LimitParams& p : params_) words += StateSize(p) / 8;
  storage_.assign(words, 0);
  std::byte* cursor = reinterpret_cast<std::byte*>(storage_.data());
  for (const LimitParams& p : params_) {
    InitState(p, cursor, now_ms);
    pointers_.push_back(cursor);
    cursor += StateSize(p);
  }
}

OwnedState::~OwnedState() {
  for (std::size_t i = 0; i < params_.size(); ++i) DestroyState(params_[i].algorithm, pointers_[i]);
}

}  // namespace tollgate::algorithms
