#include "algorithms/learned.h"

#include <algorithm>

namespace tollgate::algorithms {

void ExpireLearned(LearnedBucket& bucket, std::int64_t now_ms) {
  if (bucket.known && bucket.expires_ms != kNoExpiry && bucket.expires_ms <= now_ms) {
    bucket.known = false;
    bucket.expires_ms = kNoExpiry;
  }
}

std::int64_t CheckLearned(std::int64_t global_until_ms, LearnedBucket& bucket,
                          std::int64_t now_ms) {
  if (global_until_ms > now_ms) return global_until_ms - now_ms;
  ExpireLearned(bucket, now_ms);
  if (!bucket.known) {
    bucket.known = true;
    bucket.remaining = bucket.limit - 1;
    bucket.expires_ms = kNoExpiry;
    return 0;
  }
  if (bucket.remaining <= 0) {
    // Without an expiry an empty bucket would stay empty for good whenever
    // the lesson that should set it never came (a response without a reset,
    // a reset already over, a lost Redis call), and no request would go to
    // ask again. The default wait becomes its expiry, so it is forgotten.
    if (bucket.expires_ms == kNoExpiry) bucket.expires_ms = now_ms + kLearnedDefaultWaitMs;
    return bucket.expires_ms - now_ms;
  }
  --bucket.remaining;
  return 0;
}

std::int64_t LearnFrom(const LearnedFacts& facts, std::int64_t global_until_ms,
                       LearnedBucket& bucket, std::int64_t now_ms) {
  if (facts.limit > 0) bucket.limit = facts.limit;
  const std::int64_t reset_ms =
      facts.retry_after_ms >= 0 ? facts.retry_after_ms : facts.reset_after_ms;
  if (facts.limited && facts.global) {
    return std::max(global_until_ms, now_ms + (reset_ms > 0 ? reset_ms : kLearnedDefaultWaitMs));
  }
  ExpireLearned(bucket, now_ms);
  if (facts.limited) {
    bucket.known = true;
    bucket.remaining = 0;
  }
  if (bucket.known && reset_ms >= 0)
    bucket.expires_ms = now_ms + std::max<std::int64_t>(reset_ms, 1);
  return global_until_ms;
}

}  // namespace tollgate::algorithms
