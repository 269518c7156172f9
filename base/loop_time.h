// LoopNow(): steady_clock::now(), read at most once per handler: inside a
// HandlerTime scope every read returns the time of the scope's first read, as
// nginx caches the time once per event-loop iteration. The gateway opens one
// around each completion of a connection's read or write
// (gateway/deadline_stream.h), which is where a request's work runs: a
// request reads the time about sixteen times (deadlines, metrics, pool
// bookkeeping, the rate-limit clock) in two or three such handlers, and the
// scopes make those two or three reads.
//
// Outside any scope (timers, other handlers, tests, helper threads) every
// call reads the clock. Within one a handler does not see time pass: nothing
// may wait for the time to change inside a scope.
//
// Thread-local: each thread has its own cache; all functions are cheap and
// thread-safe.
#pragma once

#include <chrono>

namespace tollgate::store {

namespace loop_time_detail {
struct Cache {
  int depth = 0;       // HandlerTime scopes open on this thread
  bool valid = false;  // `now` was read within the outermost one
  std::chrono::steady_clock::time_point now{};
};
inline constinit thread_local Cache cache{};
}  // namespace loop_time_detail

inline std::chrono::steady_clock::time_point LoopNow() {
  loop_time_detail::Cache& c = loop_time_detail::cache;
  if (c.valid) return c.now;
  const auto now = std::chrono::steady_clock::now();
  if (c.depth > 0) {
    c.now = now;
    c.valid = true;
  }
  return now;
}

// While it lives, LoopNow() on this thread reads the clock once. Nestable:
// inner scopes share the outermost one's reading, which is forgotten when
// the outermost one ends.
class HandlerTime {
 public:
  HandlerTime() { ++loop_time_detail::cache.depth; }
  ~HandlerTime() {
    loop_time_detail::Cache& c = loop_time_detail::cache;
    if (--c.depth == 0) c.valid = false;
  }
  HandlerTime(const HandlerTime&) = delete;
  HandlerTime& operator=(const HandlerTime&) = delete;
};

}  // namespace tollgate::store
