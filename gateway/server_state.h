// Internal to Server (server.cc): what a running server holds (the stores,
// the workers, the admin side, the state in force) and what the admin
// listener reports from it (metrics, status, readiness). Thread-safety: as
// Server; the members marked so are used on the admin thread only.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gateway/core/block_table.h"
#include "gateway/core/fair_places.h"
#include "gateway/admin/admin.h"
#include "gateway/admin/admin_api.h"
#include "gateway/admin/admin_blocks.h"
#include "gateway/admin/admin_overrides.h"
#include "gateway/admin/membership.h"
#include "gateway/admin/status.h"
#include "gateway/server.h"
#include "gateway/serve/worker.h"
#include "store/lease_stats.h"
#include "store/local_store.h"
#include "store/redis_store.h"

namespace tollgate::gateway {

struct Server::Impl final : StateSource {
  // Shared by every configuration: counters survive reloads.
  std::unique_ptr<store::LocalStore> store;
  store::RedisHealth redis_health;
  // What the workers' LeasingStores count (sync = "lease").
  store::LeaseStats lease_stats;
  // The live gateways on this Redis (Membership counts them): on_error =
  // "share" divides limits by it.
  store::FleetSize fleet;
  // Redis's clock as the heartbeat last read it (time = "server"): where
  // the local fallback's windows begin and end.
  store::RedisClockOffset redis_clock_offset;
  std::optional<store::RedisClock> redis_clock;
  std::unique_ptr<Metrics> metrics;     // null when [admin] metrics = false
  std::unique_ptr<StatusBoard> status;  // with metrics; used on the admin thread only
  std::unique_ptr<WaitingRoom> waiting_room;
  ReservationLedger reservations;  // token budgets' units in flight
  BlockTable blocks;        // set by the admin API, read by admit
  OverrideTable overrides;  // likewise
  store::LocalCoordinator coordinator;
  FairPlaces upstream_places;
  std::unique_ptr<AccessLog> access_log;
  const store::Clock* clock = nullptr;
  std::atomic<std::shared_ptr<const GatewayState>> state;
  std::atomic<std::uint64_t> generation_number{1};
  // Client connections, every worker's: declared before the workers, whose
  // sessions count themselves out as the workers are destroyed.
  std::atomic<std::int64_t> connections{0};
  // Per worker with Redis and metrics: what its store decorators count.
  // Declared before the workers, whose decorators count into them.
  std::vector<std::unique_ptr<StoreFailureCounter>> store_failures;
  std::vector<std::unique_ptr<Worker>> workers;
  // The admin API's own connection to Redis (on the first worker's thread,
  // as the admin listener), apart from the request path's: its calls are
  // counted in a health of their own, not in /readyz's.
  store::RedisHealth admin_redis_health;
  std::unique_ptr<store::RedisStore> admin_redis;
  std::unique_ptr<AdminBlocks> admin_blocks;        // used on the admin thread only
  std::unique_ptr<AdminOverrides> admin_overrides;  // likewise
  std::unique_ptr<Membership> membership;           // likewise; with Redis only
  std::unique_ptr<AdminApi> api;                    // likewise
  std::unique_ptr<AdminServer> admin;
  std::vector<std::thread> threads;
  std::vector<std::uint16_t> ports;
  std::uint16_t decision_port = 0;
  std::atomic<bool> serving{false};

  // The wall clock, for what operators read.
  static double UnixSeconds();

  std::uint64_t generation() const override {
    return generation_number.load(std::memory_order_acquire);
  }
  std::shared_ptr<const GatewayState> Load() const override { return state.load(); }

  // The admin listener's /metrics, status page JSON and /readyz
  // (server_state.cc).
  std::string RenderMetrics() const;
  std::string RenderStatus() const;
  // The upstreams of `state` with a concurrency limit, as they are now.
  std::vector<UpstreamConcurrency> Concurrency(const GatewayState& state) const;
  // Not ready while draining, or when Redis is unreachable from every
  // connection and on_error = "deny" (requests would all get 503).
  AdminServer::Readiness Readiness() const;

  // Everything a configuration needs besides sockets: resolved upstreams,
  // TLS contexts, identity, rules. nullptr with `error` on failure.
  std::shared_ptr<const GatewayState> Build(std::shared_ptr<const rules::Config> config,
                                            std::string& error);
};

}  // namespace tollgate::gateway
