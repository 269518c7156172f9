#include "gateway/server.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <atomic>
#include <future>
#include <memory>
#include <optional>
#include <thread>

#include "gateway/core/adaptive_upstream.h"
#include "gateway/http1/connection_start.h"
#include "gateway/io/listen.h"
#include "gateway/server_state.h"
#include "store/failover_store.h"
#include "store/leasing_store.h"
#include "store/redis_coordinator.h"

namespace tollgate::gateway {
namespace {

// The soft limit on open descriptors, raised to the hard one: a gateway
// holds a descriptor per client and upstream connection, and a soft limit
// of 1024 (the usual default) is far below what it can serve.
void RaiseDescriptorLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
}

std::int64_t DescriptorLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 1 << 20;
  return static_cast<std::int64_t>(std::min<rlim_t>(limit.rlim_cur, rlim_t{1} << 30));
}

std::optional<tcp::endpoint> Resolve(asio::io_context& io, const rules::HostPort& hp,
                                     std::string& error) {
  tcp::resolver resolver(io);
  ErrorCode ec;
  auto results = resolver.resolve(hp.host, std::to_string(hp.port), ec);
  if (ec || results.empty()) {
    error =
        fmt::format("cannot resolve \"{}\": {}", hp.ToString(), ec ? ec.message() : "no address");
    return std::nullopt;
  }
  return results.begin()->endpoint();
}

}  // namespace

std::shared_ptr<const GatewayState> Server::Impl::Build(std::shared_ptr<const rules::Config> config,
                                                        std::string& error) {
  auto state = std::make_shared<GatewayState>();
  state->config = config;
  state->clock = clock;
  state->waiting_room = waiting_room.get();
  state->reservations = &reservations;
  state->blocks = &blocks;
  state->overrides = &overrides;
  state->upstream_places = &upstream_places;
  {
    const std::shared_ptr<const GatewayState> previous = this->state.load();
    state->upstream_adaptive = MakeAdaptiveUpstreams(
        config->upstreams, previous ? &previous->upstream_adaptive : nullptr, upstream_places);
  }
  state->access_log = access_log.get();
  state->max_connections = config->limits.max_connections > 0
                               ? config->limits.max_connections
                               : MaxConnectionsFor(DescriptorLimit());
  state->routes = std::make_unique<rules::RouteTable>(config->routes);
  for (const rules::UpstreamConfig& u : config->upstreams) {
    if (u.max_connections_delay_ms > 0) state->waits = true;
  }
  for (const rules::RuleConfig& r : config->rules) {
    if (r.action == rules::RuleAction::kDelay || r.max_delay_ms > 0) state->waits = true;
  }
  state->identity = rules::IdentityResolver::Create(config->identity, *clock, error);
  if (!state->identity) {
    error = "identity.jwt: " + error;
    return nullptr;
  }
  if (metrics) {
    for (const rules::RouteConfig& r : config->routes)
      state->route_ids.push_back(metrics->RouteId(r.name));
    for (const rules::RuleConfig& r : config->rules)
      state->rule_ids.push_back(metrics->RuleId(r.name));
    for (const rules::UpstreamConfig& u : config->upstreams) {
      state->upstream_ids.push_back(metrics->UpstreamId(u.name));
    }
    for (const rules::ListenerConfig* l : BoundListeners(*config)) {
      state->listener_ids.push_back(metrics->ListenerId(l->address.ToString()));
    }
    state->unrouted_id = metrics->RouteId("_unrouted");
  }
  asio::io_context resolver_io;
  for (const rules::UpstreamConfig& u : config->upstreams) {
    std::vector<tcp::endpoint> endpoints;
    for (const rules::HostPort& server : u.servers) {
      auto e = Resolve(resolver_io, server, error);
      if (!e) {
        error = fmt::format("upstream \"{}\": {}", u.name, error);
        return nullptr;
      }
      endpoints.push_back(*e);
    }
    state->upstream_endpoints.push_back(std::move(endpoints));
    if (u.tls) {
      auto ctx = CreateClientTls(*u.tls, error);
      if (!ctx) {
        error = fmt::format("upstream \"{}\": {}", u.name, error);
        return nullptr;
      }
      state->upstream_tls.push_back(std::move(ctx));
    } else {
      state->upstream_tls.push_back(nullptr);
    }
  }
  // A listener's session tickets and TLS 1.2 sessions go on from the
  // configuration before (listeners are the same ones, in the same order).
  const std::shared_ptr<const GatewayState> before = this->state.load();
  for (const rules::ListenerConfig* listener : BoundListeners(*config)) {
    const rules::ListenerConfig& l = *listener;
    if (l.tls()) {
      const std::size_t i = state->listener_tls.size();
      const ServerTls* previous =
          before && i < before->listener_tls.size() ? before->listener_tls[i].get() : nullptr;
      auto tls = ServerTls::Create(l, l.http2 ? AlpnOffer::kH2AndHttp11 : AlpnOffer::kHttp11,
                                   previous, *clock, error);
      if (!tls) {
        error = fmt::format("listener {}: {}", l.address.ToString(), error);
        return nullptr;
      }
      state->listener_tls.push_back(std::move(tls));
    } else {
      state->listener_tls.push_back(nullptr);
    }
  }
  // Last, when nothing can fail any more: the local store's partitions
  // become this configuration's. Each rule of the store gets its own (a
  // rule kept from the running configuration keeps its partition and its
  // counters), bounded by the rule's share of [store] max_keys.
  std::vector<store::PartitionShare> shares;
  std::vector<std::size_t> sharing;  // rule index of each share
  for (std::size_t i = 0; i < config->rules.size(); ++i) {
    if (config->rules[i].limit != nullptr) sharing.push_back(i);
  }
  for (const std::size_t i : sharing) {
    const rules::RuleConfig& rule = config->rules[i];
    // 0 only in a configuration not made by the loader: an even share.
    const std::size_t keys =
        rule.max_keys != 0 ? rule.max_keys
                           : std::max<std::size_t>(1, config->store.max_keys / sharing.size());
    shares.push_back({rule.name, keys});
  }
  const std::vector<std::uint32_t> assigned = store->AssignPartitions(shares);
  std::vector<std::uint32_t> partitions(config->rules.size(), 0);
  for (std::size_t s = 0; s < sharing.size(); ++s) partitions[sharing[s]] = assigned[s];
  state->rule_set = std::make_unique<rules::RuleSet>(config->rules, std::move(partitions));
  return state;
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  Stop();
  Wait();
}

std::unique_ptr<Server> Server::Create(std::shared_ptr<const rules::Config> config,
                                       const store::Clock& clock, std::string& error) {
  // spdlog's registry is made on first use, inside libspdlog: make it here,
  // before the workers log, rather than in a race TSan cannot see guarded.
  spdlog::default_logger_raw();
  RaiseDescriptorLimit();
  auto impl = std::make_unique<Impl>();
  impl->clock = &clock;
  impl->redis_clock.emplace(clock, impl->redis_clock_offset);
  store::LocalStoreOptions store_options;
  store_options.max_keys = config->store.max_keys;
  impl->store = std::make_unique<store::LocalStore>(store_options);
  impl->waiting_room =
      std::make_unique<WaitingRoom>(static_cast<std::size_t>(config->limits.max_waiting));
  impl->access_log = AccessLog::Create(config->log, error);
  if (!impl->access_log) return nullptr;
  const std::size_t threads = config->server.threads > 0
                                  ? static_cast<std::size_t>(config->server.threads)
                                  : std::max(1u, std::thread::hardware_concurrency());
  if (config->admin.metrics) impl->metrics = std::make_unique<Metrics>(threads, kVersion);
  std::shared_ptr<const GatewayState> state = impl->Build(config, error);
  if (!state) return nullptr;
  impl->state.store(state);
  if (impl->metrics) impl->metrics->ConfigInForce(Server::Impl::UnixSeconds());
  const rules::StoreConfig& store_config = config->store;
  if (store_config.kind == rules::StoreKind::kRedis) {
    bool fatal = false;
    if (auto problem = store::CheckRedis(store_config.redis, fatal)) {
      if (fatal) {
        error = *problem;
        return nullptr;
      }
      // Unreachable now is not fatal: the store reconnects, on_error decides meanwhile.
      spdlog::warn("{}; serving with on_error until it answers", *problem);
    }
  }
  for (std::size_t i = 0; i < threads; ++i) {
    auto worker = std::make_unique<Worker>(*impl, i, &ServeClient);
    if (impl->metrics) worker->SetMetrics(&impl->metrics->thread(i));
    if (store_config.kind == rules::StoreKind::kRedis) {
      // on_error is decided by the decorators in front of Redis: the
      // sessions see one store and one coordinator.
      store::FailureObserver* observer = nullptr;
      if (impl->metrics) {
        impl->store_failures.push_back(std::make_unique<StoreFailureCounter>(
            impl->metrics->thread(i), StoreKindLabel::kRedis));
        observer = impl->store_failures.back().get();
      }
      auto redis =
          std::make_unique<store::RedisStore>(worker->io(), store_config.redis, impl->redis_health);
      auto coordinator = std::make_unique<store::RedisCoordinator>(*redis);
      // Redis with time = "client" decides on wall-clock time; the local
      // store keeps the gateway's clock. With time = "server" the fallback
      // decides on Redis's clock as the heartbeat last read it, so that its
      // windows are Redis's: a window edge of its own mid-outage would admit
      // a limit twice within one of Redis's windows.
      const bool client_time = store_config.redis.time == store::RedisTime::kClient;
      const store::Clock* fallback_clock = client_time ? &clock : &*impl->redis_clock;
      store::RedisStore& leases = *redis;
      auto exact = std::make_unique<store::FailoverStore>(std::move(redis), *impl->store,
                                                          store_config.on_error, observer,
                                                          fallback_clock, &impl->fleet);
      store::FailoverStore& policy = *exact;
      // Rules with sync = "lease" are decided from leases (the on_error
      // policy answering for the takes Redis cannot); the others by `exact`.
      store::LeasingStore::Options lease_options;
      lease_options.grace_ms = store_config.redis.timeout_ms;
      lease_options.wall_clock = client_time;
      worker->SetStore(std::make_unique<store::LeasingStore>(worker->io(), std::move(exact),
                                                             &policy, leases, clock,
                                                             impl->lease_stats, lease_options));
      worker->SetCoordinator(std::make_unique<store::FailoverCoordinator>(
          std::move(coordinator), impl->coordinator, store_config.on_error, observer));
    } else {
      worker->SetStore(impl->store.get());
      worker->SetCoordinator(&impl->coordinator);
    }
    worker->SetConnectionCount(&impl->connections);
    impl->workers.push_back(std::move(worker));
  }
  for (auto& worker : impl->workers) {
    for (auto& other : impl->workers) {
      if (other != worker) worker->AddPeer(other.get());
    }
  }
  // Every worker binds every listener with SO_REUSEPORT; the kernel spreads
  // connections over them. The first bind of an address makes sure nothing
  // else listens there, and resolves port 0.
  asio::io_context resolver_io;
  for (const rules::ListenerConfig* l : BoundListeners(*config)) {
    auto endpoint = Resolve(resolver_io, l->address, error);
    if (!endpoint) return nullptr;
    for (auto& worker : impl->workers) {
      auto acceptor = Listen(worker->io(), *endpoint,
                             worker == impl->workers.front() ? Listening::kFirstOfThreads
                                                             : Listening::kAnotherThread,
                             error);
      if (!acceptor) {
        if (config->decision && l == &config->decision->listener) error = "[decision]: " + error;
        return nullptr;
      }
      endpoint->port(acceptor->local_endpoint().port());
      worker->acceptors().push_back(std::move(acceptor));
    }
    if (config->decision && l == &config->decision->listener) {
      impl->decision_port = endpoint->port();
      if (!endpoint->address().is_loopback() && config->decision->allow.empty() &&
          l->tls_options.client_cert != rules::ClientCertMode::kRequire) {
        spdlog::warn(
            "[decision] on {} answers every client that reaches it (it spends and shows any "
            "key's budget): set allow, or tls with client_cert = \"require\"",
            l->address.ToString());
      }
    } else {
      impl->ports.push_back(endpoint->port());
    }
  }
  auto admin_endpoint = Resolve(resolver_io, config->admin.address, error);
  if (!admin_endpoint) return nullptr;
  auto admin_acceptor =
      Listen(impl->workers.front()->io(), *admin_endpoint, Listening::kExclusive, error);
  if (!admin_acceptor) {
    error = "admin listener: " + error;
    return nullptr;
  }
  Impl* raw = impl.get();
  AdminServer::Handlers handlers;
  handlers.ready = [raw] { return raw->Readiness(); };
  if (impl->metrics) {
    impl->status = std::make_unique<StatusBoard>(*impl->metrics);
    handlers.metrics = [raw] { return raw->RenderMetrics(); };
    handlers.status = [raw] { return raw->RenderStatus(); };
    handlers.sample = [raw] {
      raw->status->Sample(static_cast<std::int64_t>(Server::Impl::UnixSeconds() * 1000));
    };
  }
  if (store_config.kind == rules::StoreKind::kRedis) {
    impl->admin_redis = std::make_unique<store::RedisStore>(
        impl->workers.front()->io(), store_config.redis, impl->admin_redis_health);
    impl->membership = std::make_unique<Membership>(*impl->admin_redis, impl->fleet,
                                                    impl->redis_clock_offset, clock);
  }
  impl->admin_blocks = std::make_unique<AdminBlocks>(impl->blocks, clock, impl->admin_redis.get());
  impl->admin_overrides =
      std::make_unique<AdminOverrides>(impl->overrides, *raw, clock, impl->admin_redis.get());
  impl->api = std::make_unique<AdminApi>(*raw,
                                         admin_acceptor->local_endpoint().address().is_loopback()
                                             ? ListenerScope::kLoopback
                                             : ListenerScope::kReachable,
                                         *impl->store, impl->admin_redis.get(), *impl->admin_blocks,
                                         *impl->admin_overrides, clock, impl->metrics.get());
  handlers.api = [api = impl->api.get()](const http::request<http::string_body>& req,
                                         std::string_view peer) { return api->Handle(req, peer); };
  impl->admin = std::make_unique<AdminServer>(impl->workers.front()->io(),
                                              std::move(*admin_acceptor), std::move(handlers));
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

bool Server::ReloadConfig(std::shared_ptr<const rules::Config> config, std::string& error) {
  const rules::Config& running = *impl_->state.load()->config;
  if (!(config->store == running.store)) {
    error = "[store] changed: the store is set up at startup, restart to change it";
    return false;
  }
  if (config->listeners.size() != running.listeners.size()) {
    error =
        "the number of [[listeners]] changed: listeners are bound at startup, restart to "
        "change them";
    return false;
  }
  for (std::size_t i = 0; i < config->listeners.size(); ++i) {
    if (config->listeners[i].address.ToString() != running.listeners[i].address.ToString() ||
        config->listeners[i].tls() != running.listeners[i].tls()) {
      error = fmt::format("listener {} changed its address or TLS: restart to change listeners",
                          running.listeners[i].address.ToString());
      return false;
    }
  }
  const rules::DecisionConfig* decision = config->decision ? &*config->decision : nullptr;
  const rules::DecisionConfig* running_decision = running.decision ? &*running.decision : nullptr;
  if ((decision == nullptr) != (running_decision == nullptr) ||
      (decision != nullptr &&
       (decision->listener.address.ToString() != running_decision->listener.address.ToString() ||
        decision->listener.certificates.size() !=
            running_decision->listener.certificates.size()))) {
    error =
        "[decision] address or tls changed: its listener is bound at startup, restart to "
        "change it";
    return false;
  }
  std::shared_ptr<const GatewayState> state = impl_->Build(config, error);
  if (!state) return false;
  impl_->state.store(state);
  impl_->generation_number.fetch_add(1, std::memory_order_acq_rel);
  if (impl_->metrics) impl_->metrics->ConfigInForce(Server::Impl::UnixSeconds());
  return true;
}

bool Server::Reload(std::shared_ptr<const rules::Config> config, std::string& error) {
  const bool ok = ReloadConfig(std::move(config), error);
  RecordReload(ok, error);
  return ok;
}

void Server::RecordReload(bool success, std::string_view error) {
  if (impl_->metrics) impl_->metrics->RecordReload(success, Server::Impl::UnixSeconds(), error);
}

void Server::Start() {
  impl_->admin->Start();
  impl_->admin_blocks->Start(impl_->workers.front()->io());
  impl_->admin_overrides->Start(impl_->workers.front()->io());
  if (impl_->membership) impl_->membership->Start(impl_->workers.front()->io());
  for (auto& worker : impl_->workers) {
    worker->StartAccepting();
    impl_->threads.emplace_back([w = worker.get()] { w->io().run(); });
  }
  impl_->serving = true;
}

std::size_t Server::SweepIdle() {
  std::size_t swept = 0;
  for (auto& worker : impl_->workers) {
    if (worker->io().stopped()) continue;
    std::promise<std::size_t> done;
    asio::post(worker->io(), [&done, w = worker.get()] {
      w->StopOwnSweeps();
      done.set_value(w->SweepIdle());
    });
    swept += done.get_future().get();
  }
  return swept;
}

void Server::Drain() {
  impl_->serving = false;
  impl_->access_log->Flush();
  asio::post(impl_->workers.front()->io(), [this] {
    impl_->admin->Stop();
    impl_->admin_blocks->Stop();
    impl_->admin_overrides->Stop();
    if (impl_->membership) impl_->membership->Stop();
  });
  for (auto& worker : impl_->workers) {
    asio::post(worker->io(), [w = worker.get()] { w->BeginDrain(); });
  }
}

void Server::Stop() {
  impl_->serving = false;
  for (auto& worker : impl_->workers) worker->io().stop();
}

void Server::Wait() {
  for (std::thread& t : impl_->threads) {
    if (t.joinable()) t.join();
  }
}

std::vector<std::uint16_t> Server::listener_ports() const { return impl_->ports; }
std::uint16_t Server::decision_port() const { return impl_->decision_port; }
std::uint16_t Server::admin_port() const { return impl_->admin->port(); }
std::size_t Server::thread_count() const { return impl_->workers.size(); }

}  // namespace tollgate::gateway
