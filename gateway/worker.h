// Per-thread gateway state: one io_context, its listeners' acceptors, its
// upstream connection pools and its live sessions. Every member is used only
// from the worker's own thread (connections never hop threads), so nothing
// here needs a lock. GatewayStates are immutable and shared between threads.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <unordered_set>
#include <vector>

#include "gateway/ops/access_log.h"
#include "gateway/ops/metrics.h"
#include "gateway/io/net.h"
#include "gateway/io/tls.h"
#include "gateway/io/upstream_pool.h"
#include "gateway/core/waiting_room.h"
#include "gateway/core/block_table.h"
#include "gateway/core/overrides.h"
#include "rules/config.h"
#include "rules/identity.h"
#include "rules/route_table.h"
#include "rules/rule_set.h"
#include "store/clock.h"
#include "store/coordinator.h"
#include "store/inflight.h"
#include "store/local_store.h"
#include "store/store.h"

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
  const BlockTable* blocks = nullptr;  // likewise: blocks survive reloads
  const OverrideTable* overrides = nullptr;  // likewise: overrides survive reloads
  FairPlaces* upstream_places = nullptr;  // likewise: concurrency, by upstream
  // By index in config->upstreams; null: not `concurrency = "adaptive"`.
  // Shared with the configurations before and after that keep them.
  std::vector<std::shared_ptr<AdaptiveUpstream>> upstream_adaptive;
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

class Session;
class Http2UpstreamPool;

// Where workers find the current configuration. Thread-safe.
class StateSource {
 public:
  // Increases with every configuration that takes effect.
  virtual std::uint64_t generation() const = 0;
  virtual std::shared_ptr<const GatewayState> Load() const = 0;

 protected:
  ~StateSource() = default;
};

// One configuration as one worker uses it: the shared state plus this
// thread's connection pools to its upstreams. A request holds its generation
// from start to end, so a reload never changes a request in flight.
struct Generation {
  ~Generation();
  std::shared_ptr<const GatewayState> state;
  // Per upstream of state->config, one of the two by its protocol: `pools`
  // for "http1", `http2_pools` for "h2" and "h2c"; the other is null.
  std::vector<std::unique_ptr<UpstreamPool>> pools;
  std::vector<std::unique_ptr<Http2UpstreamPool>> http2_pools;
};

class Worker {
 public:
  Worker(const StateSource& source, std::size_t index);
  ~Worker();

  asio::io_context& io() { return io_; }
  // This thread's metrics; null when metrics are off.
  ThreadMetrics* metrics() const { return metrics_; }
  void SetMetrics(ThreadMetrics* metrics) { metrics_ = metrics; }
  // The rate-limit store this worker's sessions use: the process's local
  // store, or this worker's Redis store behind the decorator that applies
  // [store] on_error (store::FailoverStore).
  store::Store& store() { return *store_; }
  // A store shared with other workers (not owned), or this worker's own one
  // (created on io(), destroyed before it). Call before serving.
  void SetStore(store::Store* shared) { store_ = shared; }
  void SetStore(std::unique_ptr<store::Store> own) {
    own_store_ = std::move(own);
    store_ = own_store_.get();
  }
  // Where learned limits, in-flight places and waiting lines are kept:
  // shared (not owned) or this worker's own, like the store. Call before
  // serving.
  store::Coordinator& coordinator() { return *coordinator_; }
  void SetCoordinator(store::Coordinator* shared) { coordinator_ = shared; }
  void SetCoordinator(std::unique_ptr<store::Coordinator> own) {
    own_coordinator_ = std::move(own);
    coordinator_ = own_coordinator_.get();
  }
  std::size_t index() const { return index_; }
  // The current generation, rebuilt when the configuration changed.
  const std::shared_ptr<Generation>& Current();

  std::vector<std::unique_ptr<Acceptor>>& acceptors() { return acceptors_; }
  // Starts accepting on every acceptor (listener i at acceptors()[i]).
  void StartAccepting();

  // The process's count of client connections, shared by its workers (not
  // owned). Call before serving.
  void SetConnectionCount(std::atomic<std::int64_t>* count) { connections_ = count; }
  void Register(Session* session) {
    sessions_.insert(session);
    connections_->fetch_add(1, std::memory_order_relaxed);
  }
  void Unregister(Session* session) {
    sessions_.erase(session);
    connections_->fetch_sub(1, std::memory_order_relaxed);
    if (draining_ && sessions_.empty()) FinishDrain();
  }
  // An upstream connection held by a client connection beyond the one
  // max_connections' descriptor budget reserves for each (an HTTP/2
  // client's streams hold one each): it counts as a client connection
  // does, so that accepting pauses before descriptors run out.
  void HoldExtraUpstream() { connections_->fetch_add(1, std::memory_order_relaxed); }
  void ReleaseExtraUpstream() { connections_->fetch_sub(1, std::memory_order_relaxed); }
  // The other workers of the process (not owned): asked to close an idle
  // keep-alive connection when this one has none to make room. Call before
  // serving.
  void AddPeer(Worker* peer) { peers_.push_back(peer); }
  // Closes one idle keep-alive session of this worker, if any; true when it
  // did. Runs on the worker's thread.
  bool CloseOneIdleKeepAlive();

  bool draining() const { return draining_; }
  // Stops accepting, closes idle connections; busy ones close after their
  // current exchange. Once no session is left the worker's loop stops
  // (FinishDrain), whatever else still waits on it (Redis connections,
  // pooled upstream connections, admin requests). Runs on the worker's
  // thread.
  void BeginDrain();

 private:
  Task<void> AcceptLoop(std::size_t listener);
  // The loop stops kFinishGrace after the last session: commands the last
  // exchanges handed to the store (a max_inflight place given back, a
  // lesson learned) have that long to leave before the Redis connections
  // are dropped.
  void FinishDrain();
  // Returns once the process is below max_connections (or `acceptor` is
  // closed). Meanwhile nothing is accepted (new connections wait in the
  // listen backlog) and, while one waits, every kRoomCheck one idle
  // keep-alive connection of this worker is closed to make room, as nginx
  // reuses its keep-alive connections when worker_connections run out.
  Task<void> WaitForRoom(Acceptor& acceptor);
  // The process is below max_connections, or `acceptor` is closed.
  bool HasRoom(const Acceptor& acceptor);

  const StateSource& source_;
  const std::size_t index_;
  std::uint64_t generation_number_ = 0;
  // Declared before io_: destroying io_ destroys suspended sessions, which
  // unregister themselves here.
  std::unordered_set<Session*> sessions_;
  bool draining_ = false;
  std::atomic<std::int64_t>* connections_ = nullptr;
  std::vector<Worker*> peers_;
  std::size_t next_peer_ = 0;  // asked next to make room
  std::chrono::steady_clock::time_point paused_warning_{};  // logged last
  // One thread runs it and its sockets never leave it: no reactor locking.
  asio::io_context io_{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO};
  // Declared after io_: pooled upstream sockets and acceptors close while
  // their io_context still exists.
  std::shared_ptr<Generation> generation_;
  std::vector<std::unique_ptr<Acceptor>> acceptors_;
  std::optional<Timer> finish_timer_;  // FinishDrain's
  // Completes its pending decisions (into suspended sessions) before io_
  // destroys them.
  std::unique_ptr<store::Store> own_store_;
  store::Store* store_ = nullptr;
  // Uses own_store_: declared after it, destroyed before it.
  std::unique_ptr<store::Coordinator> own_coordinator_;
  store::Coordinator* coordinator_ = nullptr;
  ThreadMetrics* metrics_ = nullptr;
};

}  // namespace tollgate::gateway
