// The rate-limit algorithms, listed once: X(enumerator, name) per algorithm,
// in the order of algorithms::Algorithm. Everything that lists them reads
// this table: the enum and its names (algorithms/limit.h, limit.cc), the
// configuration's `algorithm` choices (rules/rules_config.cc), and the Redis
// decision scripts, one per algorithm from store/lua/<name>.lua, in this
// order (store/lua/embed.cmake parses the X(...) lines below: keep one per
// line, in this form).
#pragma once

#define TOLLGATE_ALGORITHMS(X) \
  X(kTokenBucket, token_bucket) \
  X(kLeakyBucket, leaky_bucket) \
  X(kFixedWindow, fixed_window) \
  X(kSlidingLog, sliding_log)   \
  X(kSubWindow, sub_window)     \
  X(kTwoBucket, two_bucket)
