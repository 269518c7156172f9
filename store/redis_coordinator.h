// The Coordinator (store/coordinator.h) of gateways that share Redis:
// learned upstream limits, in-flight leases and waiting lines as the
// scripts of store/lua/protect, sent on this I/O thread's RedisStore
// connections (pipelined with the decisions, same deadline).
//
// Keys (braces: a Redis Cluster hash tag, so one script's keys share a slot):
//   <prefix>{upstream/<name>}:global               the upstream's global block
//   <prefix>{upstream/<name>}:<bucket>:remaining   expires at the reset
//   <prefix>{upstream/<name>}:<bucket>:limit       no expiry
//   <prefix>{<rule key>}:inflight                  leases, scored by expiry
//   <prefix>{<rule key>}:enqueued                  requests waiting
// An in-flight place is a lease that expires after `inflight_ttl`: a
// gateway that crashes loses at most its own leases, for that long.
//
// Not thread-safe: one per I/O thread, like its RedisStore. Guards it hands
// out give their place back on that thread; after the coordinator is gone
// they give nothing back (the leases expire).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "store/coordinator.h"
#include "store/redis_store.h"

namespace tollgate::store {

class RedisCoordinator final : public Coordinator {
 public:
  // `redis` must outlive the coordinator.
  explicit RedisCoordinator(RedisStore& redis);
  ~RedisCoordinator() override;

  void CheckLearned(std::string_view upstream, std::string_view bucket, std::int64_t now_ms,
                    CountSink& sink) override;
  void Learn(std::string_view upstream, std::string_view bucket,
             const algorithms::LearnedFacts& facts, std::int64_t now_ms) override;
  void AcquirePlace(std::string_view key, std::int64_t max, std::int64_t now_ms,
                    InflightGuard& place, CountSink& sink) override;
  void EnterQueue(std::string_view key, std::int64_t ttl_ms, InflightGuard& ticket,
                  CountSink& sink) override;

 private:
  struct Keeper;
  class Holder;
  RedisStore& redis_;
  std::shared_ptr<Keeper> keeper_;
  std::string lease_prefix_;  // random per coordinator: lease ids never collide
  std::uint64_t next_lease_ = 0;
};

}  // namespace tollgate::store
