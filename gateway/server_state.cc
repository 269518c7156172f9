#include "gateway/server_state.h"

#include <fmt/format.h>

#include <chrono>
#include <map>

#include "gateway/core/adaptive_upstream.h"

namespace tollgate::gateway {

double Server::Impl::UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::vector<UpstreamConcurrency> Server::Impl::Concurrency(const GatewayState& state) const {
  std::vector<UpstreamConcurrency> out;
  const std::vector<rules::UpstreamConfig>& upstreams = state.config->upstreams;
  for (std::size_t i = 0; i < upstreams.size(); ++i) {
    const AdaptiveUpstream* adaptive =
        i < state.upstream_adaptive.size() ? state.upstream_adaptive[i].get() : nullptr;
    if (upstreams[i].max_connections == 0 && adaptive == nullptr) continue;
    UpstreamConcurrency& c = out.emplace_back();
    c.upstream = upstreams[i].name;
    c.adaptive = adaptive != nullptr;
    c.limit = adaptive != nullptr ? adaptive->limit() : upstreams[i].max_connections;
    c.inflight = upstream_places.held(upstreams[i].name);
    if (adaptive != nullptr) c.min_latency_us = adaptive->min_latency_us();
  }
  return out;
}

std::string Server::Impl::RenderMetrics() const {
  ExternalGauges external;
  external.local_store_keys = static_cast<std::int64_t>(store->KeyCount());
  // Evictions by rule, for the rules of the store in force (rules that
  // share a metric label, past kMaxNames, add up).
  const std::shared_ptr<const GatewayState> current = state.load();
  const std::vector<rules::RuleConfig>& rules = current->config->rules;
  std::map<int, std::uint64_t> by_rule;
  for (std::size_t i = 0; i < rules.size() && i < current->rule_ids.size(); ++i) {
    if (rules[i].limit == nullptr) continue;
    by_rule[current->rule_ids[i]] += store->Stats(current->rule_set->partitions()[i]).evictions;
  }
  external.local_store_rule_evictions.assign(by_rule.begin(), by_rule.end());
  external.redis = state.load()->config->store.kind == rules::StoreKind::kRedis;
  external.redis_circuits_open = redis_health.circuits_open.load(std::memory_order_relaxed);
  external.redis_batched_decisions = redis_health.coalesced.load(std::memory_order_relaxed);
  if (membership != nullptr) external.cluster_gateways = fleet.Get();
  for (const auto& tls : current->listener_tls) {
    if (tls == nullptr) continue;
    for (const CertificateInfo& c : tls->certificates()) {
      external.certificate_expiry.emplace_back(c.file, c.not_after_unix);
    }
  }
  external.leases = lease_stats.Snapshot();
  external.upstream_concurrency = Concurrency(*current);
  return metrics->Render(external);
}

std::string Server::Impl::RenderStatus() const {
  StatusBoard::Context context;
  const std::shared_ptr<const GatewayState> current = state.load();
  context.config = current->config.get();
  context.generation = generation();
  const AdminServer::Readiness r = Readiness();
  context.ready = r.ready;
  context.store_json = r.store_json;
  context.version = kVersion;
  context.unix_ms = static_cast<std::int64_t>(UnixSeconds() * 1000);
  context.leases = lease_stats.Snapshot();
  context.concurrency = Concurrency(*current);
  const std::vector<const rules::ListenerConfig*> listeners = BoundListeners(*current->config);
  for (std::size_t i = 0; i < current->listener_tls.size() && i < listeners.size(); ++i) {
    if (current->listener_tls[i] == nullptr) continue;
    for (const CertificateInfo& c : current->listener_tls[i]->certificates()) {
      context.certificates.push_back(
          {listeners[i]->address.ToString(), c.file, c.subject, c.not_after_unix});
    }
  }
  return status->RenderJson(context);
}

AdminServer::Readiness Server::Impl::Readiness() const {
  AdminServer::Readiness r;
  r.ready = serving.load();
  const rules::StoreConfig& config = state.load()->config->store;
  if (config.kind == rules::StoreKind::kLocal) {
    r.store_json = fmt::format("{{\"kind\":\"local\",\"keys\":{}}}", store->KeyCount());
    return r;
  }
  const std::int64_t up = redis_health.connections_up.load(std::memory_order_relaxed);
  const std::int64_t open = redis_health.circuits_open.load(std::memory_order_relaxed);
  const bool redis_ok = up > 0 && open < up;
  if (!redis_ok && config.on_error == rules::StoreFailurePolicy::kDeny) r.ready = false;
  r.store_json = fmt::format(
      "{{\"kind\":\"redis\",\"available\":{},\"connections_up\":{},\"circuits_open\":{},"
      "\"timeouts\":{},\"unavailable\":{},\"coalesced\":{},\"gateways\":{}}}",
      redis_ok, up, open, redis_health.timeouts.load(std::memory_order_relaxed),
      redis_health.unavailable.load(std::memory_order_relaxed),
      redis_health.coalesced.load(std::memory_order_relaxed), fleet.Get());
  return r;
}

}  // namespace tollgate::gateway
