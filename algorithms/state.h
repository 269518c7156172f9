// Per-key state of one window of a limit, stored as raw bytes so that a store
// can keep it inline next to the key (see store/local_store.h).
//
// Layouts (all 8-byte aligned):
//   token_bucket, leaky_bucket: BucketState            16 bytes
//   fixed_window:               FixedWindowState       16 bytes
//   two_bucket:                 TwoBucketState         24 bytes
//   sub_window:                 SubWindowState + N counts (ring) of u16 when
//                               limit < 65535, else u32; padded to 8
//   sliding_log:                SlidingLogState        24 bytes (a log of one
//                               run inline, else a heap log of <= L runs)
//
// Ownership: the caller owns the bytes; InitState() constructs, DestroyState()
// releases what a state owns (only sliding_log owns memory). Not thread-safe:
// callers serialize access per key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <span>
#include <vector>

#include "algorithms/limit.h"

namespace tollgate::algorithms {

struct BucketState {
  std::int64_t level;    // units; one token or one queued request is W units
  std::int64_t last_ms;  // time of the last refill or drain
};

struct FixedWindowState {
  std::int64_t index;  // floor(t / W) of the counted window
  std::int64_t count;
};

struct TwoBucketState {
  std::int64_t index;  // floor(t / W) of `curr`
  std::int64_t curr;
  std::int64_t prev;  // count of window index - 1
};

// Followed in memory by N counts of SubWindowCountBytes() bytes each;
// sub-window j lives at j % N. Counts saturate at their type's maximum, which
// only a clock stepping back over and over could reach (every request is then
// counted into the newest sub-window) and which is above the limit, so a
// window holding such a sub-window stays limited as with exact counts.
struct SubWindowState {
  std::int64_t index;  // newest sub-window written, floor(t / S)
};
// 2 when every count fits 16 bits with room to saturate above the limit, else 4.
inline std::size_t SubWindowCountBytes(const LimitParams& params) {
  return params.limit < std::numeric_limits<std::uint16_t>::max() ? sizeof(std::uint16_t)
                                                                  : sizeof(std::uint32_t);
}

// Allowed unit requests as runs of equal timestamps, oldest first.
struct SlidingLog {
  struct Run {
    std::int64_t ts;
    std::int64_t count;
  };
  std::vector<Run> runs;
  std::size_t head = 0;    // runs before head are dropped
  std::int64_t units = 0;  // sum of counts of live runs
};
// Most keys hold one run at a time (a lone request, or a burst within one
// millisecond), so that run lives inline; a second timestamp moves the log to
// the heap, and it comes back inline when it empties.
struct SlidingLogState {
  SlidingLog::Run single;  // the log while `log` is null; empty when count == 0
  SlidingLog* log;         // owned; null while the log fits `single`
};

// A window's state bytes as the struct of its layout (above).
template <typename T>
T& As(std::byte* state) {
  return *std::launder(reinterpret_cast<T*>(state));
}
template <typename T>
const T& As(const std::byte* state) {
  return *std::launder(reinterpret_cast<const T*>(state));
}

// Bytes needed for one window's state.
std::size_t StateSize(const LimitParams& params);
// Constructs a fresh state (a key never seen) at time now_ms.
void InitState(const LimitParams& params, std::byte* state, std::int64_t now_ms);
// Releases what the state owns; `algorithm` is enough to know.
void DestroyState(Algorithm algorithm, std::byte* state);

// A heap-owned multi-window state, for tests, replay and benchmarks.
class OwnedState {
 public:
  OwnedState(std::span<const LimitParams> windows, std::int64_t now_ms);
  ~OwnedState();
  OwnedState(const OwnedState&) = delete;
  OwnedState& operator=(const OwnedState&) = delete;

  // One pointer per window, in the order of `windows`.
  std::span<std::byte* const> windows() { return pointers_; }

 private:
  std::vector<LimitParams> params_;
  std::vector<std::uint64_t> storage_;
  std::vector<std::byte*> pointers_;
};

}  // namespace tollgate::algorithms
