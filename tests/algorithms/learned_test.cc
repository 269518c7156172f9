// The learned-limit check (algorithms/learned.h), case by case.
#include "algorithms/learned.h"

#include <gtest/gtest.h>

namespace tollgate::algorithms {
namespace {

TEST(Learned, UnknownBucketLetsOneRequestGoThenWaitsTheDefault) {
  LearnedBucket b;
  EXPECT_EQ(CheckLearned(0, b, 1000), 0);  // started at limit - 1 = 0
  EXPECT_TRUE(b.known);
  EXPECT_EQ(b.remaining, 0);
  EXPECT_EQ(b.expires_ms, kNoExpiry);
  // No reset time known: the default wait becomes the bucket's expiry.
  EXPECT_EQ(CheckLearned(0, b, 1000), kLearnedDefaultWaitMs);
  EXPECT_EQ(b.expires_ms, 1000 + kLearnedDefaultWaitMs);
  EXPECT_EQ(CheckLearned(0, b, 1600), kLearnedDefaultWaitMs - 600);
}

// The lesson from the first response may never come (no reset in it, a
// reset already over, a lost Redis call): the empty bucket is forgotten
// after the default wait and one more request goes to ask, instead of every
// request waiting forever.
TEST(Learned, AnEmptyBucketWithoutResetIsForgottenAfterTheDefaultWait) {
  LearnedBucket b;
  EXPECT_EQ(CheckLearned(0, b, 0), 0);
  LearnedFacts nothing;
  LearnFrom(nothing, 0, b, 5);
  EXPECT_EQ(CheckLearned(0, b, 10), kLearnedDefaultWaitMs);
  EXPECT_EQ(CheckLearned(0, b, 10 + kLearnedDefaultWaitMs - 1), 1);
  EXPECT_EQ(CheckLearned(0, b, 10 + kLearnedDefaultWaitMs), 0);  // asks again
  EXPECT_EQ(b.expires_ms, kNoExpiry);
  // Likewise a 429 that gives no time.
  LearnedFacts refused;
  refused.limited = true;
  LearnFrom(refused, 0, b, 2000);
  EXPECT_EQ(CheckLearned(0, b, 2000), kLearnedDefaultWaitMs);
  EXPECT_EQ(CheckLearned(0, b, 2000 + kLearnedDefaultWaitMs), 0);
}

TEST(Learned, ALearnedLimitAndResetPaceTheBucket) {
  LearnedBucket b;
  EXPECT_EQ(CheckLearned(0, b, 0), 0);
  LearnedFacts facts;
  facts.limit = 3;
  facts.reset_after_ms = 400;
  EXPECT_EQ(LearnFrom(facts, 0, b, 10), 0);
  EXPECT_EQ(b.limit, 3);
  EXPECT_EQ(b.expires_ms, 410);
  EXPECT_EQ(b.remaining, 0);                // headers never set remaining itself
  EXPECT_EQ(CheckLearned(0, b, 100), 310);  // wait for the reset
  // After the reset, `remaining` is forgotten and starts at limit - 1.
  EXPECT_EQ(CheckLearned(0, b, 410), 0);
  EXPECT_EQ(b.remaining, 2);
  EXPECT_EQ(b.expires_ms, kNoExpiry);
  EXPECT_EQ(CheckLearned(0, b, 411), 0);
  EXPECT_EQ(CheckLearned(0, b, 412), 0);
  EXPECT_EQ(b.remaining, 0);
  EXPECT_EQ(CheckLearned(0, b, 413), kLearnedDefaultWaitMs);
  // The next response sets the expiry; decrements keep it.
  facts.reset_after_ms = 300;
  LearnFrom(facts, 0, b, 420);
  EXPECT_EQ(CheckLearned(0, b, 500), 220);
}

TEST(Learned, ALimitedAnswerEmptiesTheBucketUntilRetryAfter) {
  LearnedBucket b;
  b.limit = 10;
  EXPECT_EQ(CheckLearned(0, b, 0), 0);
  EXPECT_EQ(b.remaining, 9);
  LearnedFacts facts;
  facts.limited = true;
  facts.retry_after_ms = 2000;
  facts.reset_after_ms = 500;  // Retry-After wins
  EXPECT_EQ(LearnFrom(facts, 0, b, 100), 0);
  EXPECT_EQ(b.remaining, 0);
  EXPECT_EQ(CheckLearned(0, b, 100), 2000);
}

TEST(Learned, AGlobalBlockHoldsEveryBucket) {
  LearnedBucket a, b;
  LearnedFacts facts;
  facts.limited = true;
  facts.global = true;
  facts.retry_after_ms = 1500;
  const std::int64_t until = LearnFrom(facts, 0, a, 1000);
  EXPECT_EQ(until, 2500);
  EXPECT_FALSE(a.known);  // a global answer touches no bucket
  EXPECT_EQ(CheckLearned(until, b, 1000), 1500);
  EXPECT_FALSE(b.known);  // waiting counts nothing
  EXPECT_EQ(CheckLearned(until, b, 2500), 0);
  // Without a time: the default; an earlier block never shortens a later one.
  facts.retry_after_ms = -1;
  EXPECT_EQ(LearnFrom(facts, 0, a, 0), kLearnedDefaultWaitMs);
  EXPECT_EQ(LearnFrom(facts, 9000, a, 0), 9000);
}

}  // namespace
}  // namespace tollgate::algorithms
