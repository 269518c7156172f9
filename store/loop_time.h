// LoopNow(): steady_clock::now(), read at most once per handler on a thread
// that runs its event loop inside a LoopTimeCaching scope and calls
// ForgetLoopTime() between handlers: every read within one handler returns
// the time of its first read, as nginx caches the time once per event-loop
// iteration. A request reads the time about sixteen times (deadlines,
// metrics, pool bookkeeping, the rate-limit clock) in two or three
// handlers; the cache makes those two or three reads.
//
// Elsewhere (tests, helper threads, code run outside such a loop) every
// call reads the clock. A handler does not see time pass while it runs:
// nothing may wait for the time to change within one handler.
//
// Thread-local: each thread has its own cache; all functions are cheap and
// thread-safe.
#pragma once

#include <chrono>

namespace tollgate::store {

namespace loop_time_detail {
struct Cache {
  bool enabled = false;  // inside a LoopTimeCaching scope on this thread
  bool valid = false;    // `now` was read during the current handler
  std::chrono::steady_clock::time_point now{};
};
inline constinit thread_local Cache cache{};
}  // namespace loop_time_detail

inline std::chrono::steady_clock::time_point LoopNow() {
  loop_time_detail::Cache& c = loop_time_detail::cache;
  if (c.valid) return c.now;
  const auto now = std::chrono::steady_clock::now();
  if (c.enabled) {
    c.now = now;
    c.valid = true;
  }
  return now;
}

// The current handler is over: the next LoopNow() reads the clock.
inline void ForgetLoopTime() { loop_time_detail::cache.valid = false; }

// While it lives, LoopNow() on this thread caches its reads until the next
// ForgetLoopTime(). Not nestable.
class LoopTimeCaching {
 public:
  LoopTimeCaching() { loop_time_detail::cache = {true, false, {}}; }
  ~LoopTimeCaching() { loop_time_detail::cache = {}; }
  LoopTimeCaching(const LoopTimeCaching&) = delete;
  LoopTimeCaching& operator=(const LoopTimeCaching&) = delete;
};

}  // namespace tollgate::store
