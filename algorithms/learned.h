// The check in front of an upstream whose own rate limits tollgate learned
// from its response headers (docs/protecting-upstreams.md): a bucket's `remaining` counter, with
// an optional expiry set by the upstream's reset time, and a global block.
// Pure functions over a small state value; no I/O, clock or locks. The Redis
// scripts store/lua/protect/learned_{check,learn}.lua follow them line for
// line (learn also ignores a reset that is over by the time it runs: a
// lesson applied late, after pipelining, must not shorten the next window).
#pragma once

#include <cstdint>

namespace tollgate::algorithms {

inline constexpr std::int64_t kNoExpiry = 0;
inline constexpr std::int64_t kLearnedDefaultWaitMs = 1000;  // a bucket without reset time

struct LearnedBucket {
  bool known = false;  // `remaining` exists (and has not expired)
  std::int64_t remaining = 0;
  std::int64_t expires_ms = kNoExpiry;  // when `remaining` is forgotten; kNoExpiry: never
  std::int64_t limit = 1;               // learned; 1 until the upstream says otherwise
};

// Forgets `remaining` once its expiry has passed.
void ExpireLearned(LearnedBucket& bucket, std::int64_t now_ms);

// Whether a request may go to the upstream now: 0 = yes (and it is counted),
// otherwise how many ms to wait before checking again.
//  - globally blocked until `global_until_ms`: wait for it;
//  - `remaining` unknown: start it at limit - 1, no expiry, go;
//  - remaining <= 0: wait for its expiry; without one, it gets one
//    kLearnedDefaultWaitMs away (and waits for it);
//  - otherwise decrement it (its expiry stays) and go.
std::int64_t CheckLearned(std::int64_t global_until_ms, LearnedBucket& bucket, std::int64_t now_ms);

// What a response taught: each field < 0 when the response did not say.
struct LearnedFacts {
  std::int64_t limit = -1;           // requests per upstream window
  std::int64_t reset_after_ms = -1;  // until the upstream's window resets
  std::int64_t retry_after_ms = -1;  // on 429/503
  bool limited = false;              // the upstream answered 429
  bool global = false;               // ... for the whole upstream
};

// Applies a response: it only ever sets the bucket's limit, the expiry of
// its `remaining`, and (returned) the global block's expiry. A limited
// (429) answer that is not global also sets `remaining` to 0, so that no
// further request goes before the reset. Returns the new global block
// expiry (`global_until_ms` when unchanged).
std::int64_t LearnFrom(const LearnedFacts& facts, std::int64_t global_until_ms,
                       LearnedBucket& bucket, std::int64_t now_ms);

}  // namespace tollgate::algorithms
