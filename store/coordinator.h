// What tollgate shares, besides rate-limit state, to protect upstreams
// (docs/protecting-upstreams.md): the limits learned from an upstream's
// headers, the in-flight places of `max_inflight` rules, and the waiting
// lines of `action = "delay"` rules. LocalCoordinator keeps them in this
// process; RedisCoordinator (store/redis_coordinator.h) in Redis, shared by
// every gateway.
//
// Every call completes its sink exactly once, inline or later on the
// caller's I/O thread, within the store's deadline. Thread-safety: that of
// the implementation (LocalCoordinator: any thread; RedisCoordinator: its
// I/O thread only).
#pragma once

#include <cstdint>
#include <string_view>

#include "algorithms/learned.h"
#include "store/inflight.h"
#include "store/learned_limits.h"
#include "store/store.h"

namespace tollgate::store {

class Coordinator {
 public:
  virtual ~Coordinator() = default;

  // algorithms::CheckLearned for `bucket` of `upstream`: `sink` gets 0 (go;
  // the request is counted) or the ms to wait before checking again.
  virtual void CheckLearned(std::string_view upstream, std::string_view bucket, std::int64_t now_ms,
                            CountSink& sink) = 0;
  // algorithms::LearnFrom with what a response of `upstream` said. Nobody
  // waits for it.
  virtual void Learn(std::string_view upstream, std::string_view bucket,
                     const algorithms::LearnedFacts& facts, std::int64_t now_ms) = 0;

  // One of `max` places of `key`: `sink` gets 1 with `place` holding it, or
  // 0 when `max` are in flight. `place` must outlive the call.
  virtual void AcquirePlace(std::string_view key, std::int64_t max, std::int64_t now_ms,
                            InflightGuard& place, CountSink& sink) = 0;

  // Joins the waiting line of `key` (a delayed request): `sink` gets how
  // many were waiting before; `ticket` leaves the line when destroyed.
  // `ttl_ms` bounds how long a line outlives a gateway that died in it.
  virtual void EnterQueue(std::string_view key, std::int64_t ttl_ms, InflightGuard& ticket,
                          CountSink& sink) = 0;
};

// The coordinator of one process. Thread-safe; completes every call inline.
class LocalCoordinator final : public Coordinator {
 public:
  void CheckLearned(std::string_view upstream, std::string_view bucket, std::int64_t now_ms,
                    CountSink& sink) override;
  void Learn(std::string_view upstream, std::string_view bucket,
             const algorithms::LearnedFacts& facts, std::int64_t now_ms) override;
  void AcquirePlace(std::string_view key, std::int64_t max, std::int64_t now_ms,
                    InflightGuard& place, CountSink& sink) override;
  void EnterQueue(std::string_view key, std::int64_t ttl_ms, InflightGuard& ticket,
                  CountSink& sink) override;

  // For tests and the status page.
  LearnedLimits& learned() { return learned_; }
  InflightTable& places() { return places_; }
  InflightTable& queues() { return queues_; }

 private:
  LearnedLimits learned_;
  InflightTable places_;
  InflightTable queues_;
};

}  // namespace tollgate::store
