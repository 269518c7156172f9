#include "store/redis/breaker.h"

#include <spdlog/spdlog.h>

namespace tollgate::store::redis {

CircuitBreaker::~CircuitBreaker() {
  if (open_) health_.circuits_open.fetch_sub(1, std::memory_order_relaxed);
}

void CircuitBreaker::Success() {
  failures_ = 0;
  if (open_) {
    open_ = false;
    health_.circuits_open.fetch_sub(1, std::memory_order_relaxed);
    spdlog::info("redis: circuit closed");
  }
}

void CircuitBreaker::Failure(std::int64_t now) {
  if (++failures_ >= options_.breaker_failures && !open_) {
    open_ = true;
    health_.circuits_open.fetch_add(1, std::memory_order_relaxed);
    spdlog::warn("redis: circuit open after {} failures in a row", failures_);
  }
  if (open_) open_until_ = now + options_.breaker_open_ms;
}

}  // namespace tollgate::store::redis
