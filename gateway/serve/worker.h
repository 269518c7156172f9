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

#include "gateway/core/gateway_state.h"
#include "gateway/core/services.h"
#include "gateway/io/net.h"
#include "gateway/io/upstream_pool.h"
#include "gateway/telemetry/metrics.h"
#include "store/coordinator.h"
#include "store/inflight.h"
#include "store/local_store.h"
#include "store/store.h"

namespace tollgate::gateway {

class Http2UpstreamPool;
class Worker;

// A client connection as its worker sees it: counted while it lives, and
// closed when idle (drain, or to make room under max_connections).
class ClientConnection {
 public:
  // Drain: a connection waiting for its next request is closed now; an
  // HTTP/2 one sends GOAWAY, and its streams in flight finish.
  virtual void CloseIfIdle() = 0;
  // Likewise, but only one that has served a request (an idle keep-alive
  // connection, not a new one yet to send its first); true when closed.
  virtual bool CloseIfIdleKeepAlive() = 0;
  // The worker's idle sweep (Worker::SweepIdle): a connection that has
  // waited for its next request since the last sweep gives back what the
  // wait does not need (an HTTP/1.1 connection its coroutine); true when
  // this sweep made it do so.
  virtual bool SweepIdle() { return false; }

 protected:
  ~ClientConnection() = default;
};

// Serves one accepted connection (`stream`, its TLS handshake not made yet)
// on `worker`: the start step and the protocol adapters
// (gateway/http1/connection_start.h's ServeClient), handed to the worker by
// the server.
using ServeConnection = Task<void> (*)(Worker& worker, AnyStream stream, std::size_t listener,
                                       const tcp::endpoint& peer);

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
  Worker(const StateSource& source, std::size_t index, ServeConnection serve);
  ~Worker();

  asio::io_context& io() { return io_; }
  // This thread's metrics; null when metrics are off.
  ThreadMetrics* metrics() const { return services_.metrics; }
  void SetMetrics(ThreadMetrics* metrics) { services_.metrics = metrics; }
  // What the request pipeline uses of this worker (gateway/core/services.h).
  const CoreServices& services() const { return services_; }
  // The rate-limit store this worker's sessions use: the process's local
  // store, or this worker's Redis store behind the decorator that applies
  // [store] on_error (store::FailoverStore).
  store::Store& store() { return *services_.store; }
  // A store shared with other workers (not owned), or this worker's own one
  // (created on io(), destroyed before it). Call before serving.
  void SetStore(store::Store* shared) { services_.store = shared; }
  void SetStore(std::unique_ptr<store::Store> own) {
    own_store_ = std::move(own);
    services_.store = own_store_.get();
  }
  // Where learned limits, in-flight places and waiting lines are kept:
  // shared (not owned) or this worker's own, like the store. Call before
  // serving.
  store::Coordinator& coordinator() { return *services_.coordinator; }
  void SetCoordinator(store::Coordinator* shared) { services_.coordinator = shared; }
  void SetCoordinator(std::unique_ptr<store::Coordinator> own) {
    own_coordinator_ = std::move(own);
    services_.coordinator = own_coordinator_.get();
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
  void Register(ClientConnection* connection) {
    clients_.insert(connection);
    connections_->fetch_add(1, std::memory_order_relaxed);
  }
  void Unregister(ClientConnection* connection) {
    clients_.erase(connection);
    connections_->fetch_sub(1, std::memory_order_relaxed);
    if (draining_ && clients_.empty()) FinishDrain();
  }
  // `next` serves the connection `previous` served (still counted once).
  void Replace(ClientConnection* previous, ClientConnection* next) {
    clients_.erase(previous);
    clients_.insert(next);
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
  // Closes one idle keep-alive connection of this worker, if any; true when it
  // did. Runs on the worker's thread.
  bool CloseOneIdleKeepAlive();

  bool draining() const { return draining_; }
  // Stops accepting, closes idle connections; busy ones close after their
  // current exchange. Once no connection is left the worker's loop stops
  // (FinishDrain), whatever else still waits on it (Redis connections,
  // pooled upstream connections, admin requests). Runs on the worker's
  // thread.
  void BeginDrain();
  // Asks every connection to give back what its idle wait does not need
  // (ClientConnection::SweepIdle); returns how many were asked. Runs on its
  // own every kIdleSweep from StartAccepting. Worker thread only.
  std::size_t SweepIdle();
  // The worker's own sweeps stop: the caller sweeps from now on (tests, to
  // count what each sweep does). Worker thread only.
  void StopOwnSweeps();

 private:
  Task<void> AcceptLoop(std::size_t listener);
  Task<void> SweepLoop();
  // The loop stops kFinishGrace after the last connection: commands the last
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
  const ServeConnection serve_;
  std::uint64_t generation_number_ = 0;
  // Declared before io_: destroying io_ destroys suspended sessions, which
  // unregister themselves here.
  std::unordered_set<ClientConnection*> clients_;
  bool draining_ = false;
  std::atomic<std::int64_t>* connections_ = nullptr;
  std::vector<Worker*> peers_;
  std::size_t next_peer_ = 0;  // asked next to make room
  std::chrono::steady_clock::time_point paused_warning_{};  // logged last
  // Declared before io_: the sessions it destroys may give theirs back.
  std::unique_ptr<SettlementPool> settlements_;
  // One thread runs it and its sockets never leave it: no reactor locking.
  asio::io_context io_{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO};
  // Declared after io_: pooled upstream sockets and acceptors close while
  // their io_context still exists.
  std::shared_ptr<Generation> generation_;
  std::vector<std::unique_ptr<Acceptor>> acceptors_;
  std::optional<Timer> finish_timer_;  // FinishDrain's
  // SweepLoop's (after io_, as finish_timer_: destroyed before it).
  std::optional<Timer> sweep_timer_;
  bool own_sweeps_ = true;
  // Completes its pending decisions (into suspended sessions) before io_
  // destroys them.
  std::unique_ptr<store::Store> own_store_;
  // Uses own_store_: declared after it, destroyed before it.
  std::unique_ptr<store::Coordinator> own_coordinator_;
  CoreServices services_{io_.get_executor()};
};

}  // namespace tollgate::gateway
