// The state built from one configuration (GatewayState), shared read-only
// by every worker, and where workers find the one in force (StateSource).
// Immutable once built; thread-safe to read.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "gateway/core/block_table.h"
#include "gateway/core/overrides.h"
#include "gateway/core/reservation_ledger.h"
#include "gateway/core/waiting_room.h"
#include "gateway/io/tls.h"
#include "gateway/telemetry/access_log.h"
#include "rules/config.h"
#include "rules/identity.h"
#include "rules/route_table.h"
#include "rules/rule_set.h"
#include "base/clock.h"

namespace tollgate::gateway {

class AdaptiveUpstream;
class FairPlaces;

// Everything built from one configuration, shared read-only by all workers.
struct GatewayState {
  std::shared_ptr<const rules::Config> config;
  std::unique_ptr<rules::RouteTable> routes;
  std::vector<std::unique_ptr<ServerTls>> listener_tls;        // per listener; null: plain
  std::vector<std::unique_ptr<ssl::context>> upstream_tls;     // per upstream; null: plain
  std::vector<std::vector<tcp::endpoint>> upstream_endpoints;  // per upstream, per server
  std::unique_ptr<rules::IdentityResolver> identity;
  std::unique_ptr<rules::RuleSet> rule_set;
  // Outlives the state (kept across configurations). The rate-limit store
  // and coordinator are the worker's (Worker::store(), coordinator()).
  WaitingRoom* waiting_room = nullptr;
  ReservationLedger* reservations = nullptr;  // likewise: in flight across reloads
  const BlockTable* blocks = nullptr;  // likewise: blocks survive reloads
  const OverrideTable* overrides = nullptr;  // likewise: overrides survive reloads
  FairPlaces* upstream_places = nullptr;  // likewise: concurrency, by upstream
  // By index in config->upstreams; null: not `concurrency = "adaptive"`.
  // Shared with the configurations before and after that keep them.
  std::vector<std::shared_ptr<AdaptiveUpstream>> upstream_adaptive;
  // Some upstream (max_connections_delay) or rule (action = "delay", or
  // max_inflight with max_delay) lets a request wait: only then does admit
  // need the request's flow (FlowOf) and weight for the fair order.
  bool waits = false;
  // [limits] weight: a waiting request's weight by its role (1 if unlisted).
  std::uint32_t WeightOf(std::string_view role) const {
    for (const auto& [name, weight] : config->limits.weight) {
      if (name == role) return weight;
    }
    return 1;
  }
  AccessLog* access_log = nullptr;
  const store::Clock* clock = nullptr;
  // Metric label ids (see Metrics) by index in config->routes, ->rules,
  // ->upstreams and ->listeners; empty when metrics are off.
  std::vector<int> route_ids, rule_ids, upstream_ids, listener_ids;
  int unrouted_id = 0;  // requests that matched no route
  // Client connections the process keeps open at most ([limits]
  // max_connections, or what the descriptor limit allows).
  std::int64_t max_connections = 0;
};

// The listeners a configuration binds, in the order of the acceptors,
// listener_tls and listener_ids: [[listeners]], then [decision]'s.
std::vector<const rules::ListenerConfig*> BoundListeners(const rules::Config& config);
// Whether acceptor `listener` is [decision]'s (gateway/decision/).
inline bool IsDecisionListener(const rules::Config& config, std::size_t listener) {
  return config.decision && listener == config.listeners.size();
}

// [limits] max_connections = 0: half of the descriptors left after a
// reserve of 64 (listeners, Redis, the logs), the other half for the
// upstream connection each client connection may hold; at least 1.
std::int64_t MaxConnectionsFor(std::int64_t descriptor_limit);

// Where workers find the current configuration. Thread-safe.
class StateSource {
 public:
  // Increases with every configuration that takes effect.
  virtual std::uint64_t generation() const = 0;
  virtual std::shared_ptr<const GatewayState> Load() const = 0;

 protected:
  ~StateSource() = default;
};

}  // namespace tollgate::gateway
