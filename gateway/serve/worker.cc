#include "gateway/serve/worker.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <vector>

#include "gateway/core/settlement.h"
#include "gateway/http2/upstream_pool.h"
#include "gateway/io/draining_read.h"
#include "gateway/io/socket_internals.h"

namespace tollgate::gateway {

Worker::Worker(const StateSource& source, std::size_t index, ServeConnection serve)
    : source_(source), index_(index), serve_(serve),
      settlements_(std::make_unique<SettlementPool>()) {
  services_.settlements = settlements_.get();
  Current();
}

// Sessions that io_ destroys unregister while it is being torn down: not a
// drain ending.
Worker::~Worker() { draining_ = false; }

Generation::~Generation() = default;

const std::shared_ptr<Generation>& Worker::Current() {
  const std::uint64_t number = source_.generation();
  if (generation_ && number == generation_number_) return generation_;
  auto next = std::make_shared<Generation>();
  next->state = source_.Load();
  const GatewayState& state = *next->state;
  const auto write_timeout = std::chrono::milliseconds(state.config->timeouts.upstream_response_ms);
  for (std::size_t i = 0; i < state.config->upstreams.size(); ++i) {
    const rules::UpstreamConfig& upstream = state.config->upstreams[i];
    if (upstream.protocol == rules::UpstreamProtocol::kHttp1) {
      next->pools.push_back(std::make_unique<UpstreamPool>(
          upstream, state.upstream_endpoints[i], state.upstream_tls[i].get(), *state.clock));
      next->http2_pools.push_back(nullptr);
    } else {
      next->pools.push_back(nullptr);
      next->http2_pools.push_back(std::make_unique<Http2UpstreamPool>(
          upstream, state.upstream_endpoints[i], state.upstream_tls[i].get(), *state.clock,
          Http2OptionsFor(upstream, write_timeout)));
    }
  }
  generation_ = std::move(next);
  generation_number_ = number;
  return generation_;
}

void Worker::StartAccepting() {
  for (std::size_t i = 0; i < acceptors_.size(); ++i) {
    asio::co_spawn(io_, AcceptLoop(i), asio::detached);
  }
  asio::co_spawn(io_, SweepLoop(), asio::detached);
}

// How often idle connections are swept: a connection gives back its idle
// wait's extras only once it has been idle for one sweep interval at least
// (two sweeps in a row found it idle), so that a busy keep-alive
// connection, idle only between its requests, keeps them and pays nothing
// per request, while one idle for seconds (most of a real API's clients)
// costs little more than its socket.
constexpr auto kIdleSweep = std::chrono::seconds(1);

Task<void> Worker::SweepLoop() {
  sweep_timer_.emplace(io_.get_executor());
  while (!draining_ && own_sweeps_) {
    sweep_timer_->expires_after(kIdleSweep);
    co_await sweep_timer_->async_wait(kUseTuple);
    if (!draining_ && own_sweeps_) SweepIdle();
  }
}

void Worker::StopOwnSweeps() {
  own_sweeps_ = false;
  if (sweep_timer_) sweep_timer_->cancel();
}

std::size_t Worker::SweepIdle() {
  // A connection's sweep only sets flags and cancels a wait: none ends (and
  // leaves clients_) before the loop does.
  std::size_t swept = 0;
  for (ClientConnection* c : clients_) swept += c->SweepIdle() ? 1 : 0;
  return swept;
}

std::vector<const rules::ListenerConfig*> BoundListeners(const rules::Config& config) {
  std::vector<const rules::ListenerConfig*> out;
  for (const rules::ListenerConfig& l : config.listeners) out.push_back(&l);
  if (config.decision) out.push_back(&config.decision->listener);
  return out;
}

std::int64_t MaxConnectionsFor(std::int64_t descriptor_limit) {
  return std::max<std::int64_t>(1, (descriptor_limit - 64) / 2);
}

bool Worker::HasRoom(const Acceptor& acceptor) {
  return connections_->load(std::memory_order_relaxed) < Current()->state->max_connections ||
         !acceptor.is_open();
}

Task<void> Worker::WaitForRoom(Acceptor& acceptor) {
  constexpr auto kRoomCheck = std::chrono::milliseconds(10);
  const auto room = [&] { return HasRoom(acceptor); };
  for (;;) {
    if (room()) co_return;
    // Only for a client that is waiting to connect is room made.
    co_await acceptor.async_wait(tcp::acceptor::wait_read, kUseTuple);
    if (room()) co_return;
    const std::int64_t max = Current()->state->max_connections;
    // At most one warning a minute: a gateway at its bound pauses often.
    if (const auto now = std::chrono::steady_clock::now();
        now - paused_warning_ >= std::chrono::minutes(1)) {
      spdlog::warn("{} client connections (max_connections): accepting paused", max);
      paused_warning_ = now;
    }
    // This worker's idle connection, else another worker's: the bound is
    // the process's.
    if (!CloseOneIdleKeepAlive() && !peers_.empty()) {
      Worker* peer = peers_[next_peer_++ % peers_.size()];
      asio::post(peer->io(), [peer] { peer->CloseOneIdleKeepAlive(); });
    }
    asio::steady_timer pause(io_, kRoomCheck);
    co_await pause.async_wait(kUseTuple);
  }
}

namespace {

// What every client connection has: no Nagle delay, and reads that know what
// they leave queued (draining_read.h).
void SetConnectionOptions(int fd) {
  const int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  EnableDrainingReads(fd);
}

// Whether the accepted `fd` has them already: Linux copies both from the
// listening socket, which saves two setsockopt() per connection.
bool HasConnectionOptions(int fd) {
  const auto on = [fd](int option) {
    int value = 0;
    socklen_t size = sizeof value;
    return ::getsockopt(fd, IPPROTO_TCP, option, &value, &size) == 0 && value != 0;
  };
  return on(TCP_NODELAY) && on(TCP_INQ);
}

// Whether a client at `peer` may use acceptor `listener`: [decision]
// allow bounds the decision listener's clients; the others take anyone.
bool Admitted(const rules::Config& config, std::size_t listener, const tcp::endpoint& peer) {
  if (!IsDecisionListener(config, listener) || config.decision->allow.empty()) return true;
  const std::optional<rules::IpAddress> address =
      rules::IpAddress::Parse(peer.address().to_string());
  return address && std::any_of(config.decision->allow.begin(), config.decision->allow.end(),
                                [&](const rules::Cidr& c) { return c.Contains(*address); });
}

}  // namespace

Task<void> Worker::AcceptLoop(std::size_t listener) {
  Acceptor& acceptor = *acceptors_[listener];
  SetConnectionOptions(acceptor.native_handle());
  // Checked on the first connection: set per connection if not inherited.
  bool checked = false;
  bool inherited = false;
  for (;;) {
    // Checked here first: no coroutine frame per accept while there is room.
    if (!HasRoom(acceptor)) co_await WaitForRoom(acceptor);
    // The peer's address comes with the accept (no getpeername() later).
    TcpSocket socket(io_);
    tcp::endpoint peer;
    ErrorCode ec;
    const AcceptOutcome outcome = AcceptNow(acceptor, socket, peer, ec);
    if (outcome == AcceptOutcome::kWouldBlock) {
      auto [wait_ec] = co_await acceptor.async_wait(tcp::acceptor::wait_read, kUseTuple);
      if (wait_ec && (wait_ec == asio::error::operation_aborted || !acceptor.is_open())) co_return;
      continue;
    }
    if (outcome == AcceptOutcome::kUnsupported) {
      auto [accept_ec] = co_await acceptor.async_accept(socket, peer, kUseTuple);
      ec = accept_ec;
    }
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
      // Out of descriptors and the like: back off instead of spinning.
      asio::steady_timer pause(io_, std::chrono::milliseconds(50));
      co_await pause.async_wait(kUseTuple);
      continue;
    }
    if (!Admitted(*Current()->state->config, listener, peer)) {
      spdlog::debug("[decision]: connection from {} closed: not in allow",
                    peer.address().to_string());
      socket.close(ec);
      // As after a session starts: a flood of refused clients does not
      // hold the thread.
      if (outcome == AcceptOutcome::kAccepted) co_await asio::post(io_, kUseTuple);
      continue;
    }
    if (!checked) {
      inherited = HasConnectionOptions(socket.native_handle());
      checked = true;
    }
    if (!inherited) SetConnectionOptions(socket.native_handle());
    // New connections get the current configuration's certificates.
    ServerTls* tls = Current()->state->listener_tls[listener].get();
    AnyStream stream =
        tls != nullptr ? AnyStream(std::in_place_type<TlsStream>, std::move(socket), tls->context())
                       : AnyStream(std::in_place_type<TcpStream>, std::move(socket));
    asio::co_spawn(io_, serve_(*this, std::move(stream), listener, peer), asio::detached);
    // Queued handlers run before the next accept, as after Asio's accept,
    // whose completion is queued: accepting many in a row would make each
    // new client wait for the handshakes of those taken ahead of it
    // (docs/performance.md).
    if (outcome == AcceptOutcome::kAccepted) co_await asio::post(io_, kUseTuple);
  }
}

bool Worker::CloseOneIdleKeepAlive() {
  for (ClientConnection* s : clients_) {
    if (s->CloseIfIdleKeepAlive()) return true;
  }
  return false;
}

void Worker::FinishDrain() {
  constexpr auto kFinishGrace = std::chrono::milliseconds(100);
  if (finish_timer_) return;
  finish_timer_.emplace(io_, kFinishGrace);
  finish_timer_->async_wait([this](const ErrorCode& ec) {
    if (!ec) io_.stop();
  });
}

void Worker::BeginDrain() {
  draining_ = true;
  if (sweep_timer_) sweep_timer_->cancel();
  store().Drain();
  for (auto& acceptor : acceptors_) {
    ErrorCode ec;
    acceptor->close(ec);
  }
  // Copy: closing may end sessions, which unregister themselves.
  const std::vector<ClientConnection*> sessions(clients_.begin(), clients_.end());
  for (ClientConnection* s : sessions) s->CloseIfIdle();
  if (clients_.empty()) FinishDrain();
}

}  // namespace tollgate::gateway
