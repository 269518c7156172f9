// Internal to the Redis store: the circuit breaker of one connection. After
// RedisOptions::breaker_failures failures in a row the circuit opens: no
// decision is sent, except one probe per breaker_open_ms (milliseconds on
// the gateway's steady clock), until a success closes it again. The number
// of open circuits is kept in RedisHealth::circuits_open.
// Thread-safety: one connection's, on its thread only.
#pragma once

#include <cstdint>

#include "store/redis_options.h"

namespace tollgate::store::redis {

class CircuitBreaker {
 public:
  // `options` and `health` outlive the breaker.
  CircuitBreaker(const RedisOptions& options, RedisHealth& health)
      : options_(options), health_(health) {}
  ~CircuitBreaker();
  CircuitBreaker(const CircuitBreaker&) = delete;
  CircuitBreaker& operator=(const CircuitBreaker&) = delete;

  // Whether a decision may be sent at `now`: always while closed; while
  // open, the first call after each breaker_open_ms (the probe).
  bool Allow(std::int64_t now) {
    if (!open_) return true;
    if (now < open_until_) return false;
    open_until_ = now + options_.breaker_open_ms;
    return true;
  }

  // A reply arrived: closes the circuit.
  void Success();
  // A command failed (timeout, error) at `now`.
  void Failure(std::int64_t now);

 private:
  const RedisOptions& options_;
  RedisHealth& health_;
  bool open_ = false;
  int failures_ = 0;
  std::int64_t open_until_ = 0;
};

}  // namespace tollgate::store::redis
