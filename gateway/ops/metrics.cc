#include "gateway/ops/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <span>

#include "gateway/ops/metrics_writer.h"
#include "gateway/ops/process_metrics.h"

namespace tollgate::gateway {
namespace {

constexpr std::string_view kDecisionNames[kDecisionKinds] = {"allowed", "limited", "delayed",
                                                             "dry_run", "exempt",  "error"};
constexpr std::string_view kUpstreamFailureNames[kUpstreamFailures] = {"connect", "timeout",
                                                                       "reset"};
constexpr std::string_view kStoreNames[2] = {"local", "redis"};
constexpr std::string_view kStoreErrorNames[kStoreErrorKinds] = {"timeout", "unavailable", "error"};
constexpr std::string_view kPolicyNames[store::kFailurePolicies] = {"allow", "deny", "local",
                                                                    "share"};
constexpr std::string_view kHandshakeNames[kHandshakeResults] = {"ok", "failed", "resumed"};
constexpr std::string_view kHandshakeFailureNames[kHandshakeFailures] = {"no_certificate",
                                                                         "certificate_expired",
                                                                         "certificate_revoked",
                                                                         "unknown_ca",
                                                                         "bad_certificate",
                                                                         "protocol",
                                                                         "timeout",
                                                                         "closed"};

template <typename T>
std::unique_ptr<T[]> Zeroed(std::size_t n) {
  return std::unique_ptr<T[]>(new T[n]());
}

std::uint64_t Load(const std::atomic<std::uint64_t>& a) {
  return a.load(std::memory_order_relaxed);
}

// Label values: backslash, double quote and line feed escaped.
std::string Escape(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

void Histogram::Observe(double seconds) {
  // The first bucket without a search: the common case of a time under
  // its bound.
  const std::size_t i =
      seconds <= kDurationBuckets.front()
          ? 0
          : static_cast<std::size_t>(
                std::lower_bound(kDurationBuckets.begin(), kDurationBuckets.end(), seconds) -
                kDurationBuckets.begin());
  buckets_[i].store(buckets_[i].load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  sum_.store(sum_.load(std::memory_order_relaxed) + seconds, std::memory_order_relaxed);
}

void Histogram::Snapshot::Add(const Histogram& h) {
  for (std::size_t i = 0; i < buckets.size(); ++i) buckets[i] += Load(h.buckets_[i]);
  sum += h.sum_.load(std::memory_order_relaxed);
}

std::uint64_t Histogram::Snapshot::count() const {
  std::uint64_t n = 0;
  for (std::uint64_t b : buckets) n += b;
  return n;
}

ThreadMetrics::ThreadMetrics()
    : requests_(Zeroed<std::atomic<std::uint64_t>>(kMaxNames * kStatuses)),
      request_duration_(new Histogram[kMaxNames]),
      decisions_(Zeroed<std::atomic<std::uint64_t>>(kMaxNames * kDecisionKinds)),
      upstream_duration_(new Histogram[kMaxNames]),
      upstream_failures_(Zeroed<std::atomic<std::uint64_t>>(kMaxNames * kUpstreamFailures)),
      connections_(Zeroed<std::atomic<std::int64_t>>(kMaxNames)),
      tls_handshakes_(Zeroed<std::atomic<std::uint64_t>>(kMaxNames * kHandshakeResults)),
      tls_handshake_failures_(Zeroed<std::atomic<std::uint64_t>>(kMaxNames * kHandshakeFailures)),
      websockets_(Zeroed<std::atomic<std::int64_t>>(kMaxNames)),
      websocket_bytes_(Zeroed<std::atomic<std::uint64_t>>(kMaxNames * 2)),
      grpc_responses_(Zeroed<std::atomic<std::uint64_t>>(kMaxNames * kGrpcStatuses)) {}

void ThreadMetrics::RecordRequest(int route, unsigned status, double seconds) {
  if (status >= 100 && status < 600) Bump(requests_[route * kStatuses + (status - 100)]);
  request_duration_[route].Observe(seconds);
}

void ThreadMetrics::RecordDecision(int rule, DecisionKind kind) {
  Bump(decisions_[rule * kDecisionKinds + static_cast<int>(kind)]);
}

void ThreadMetrics::RecordUpstream(int upstream, double seconds) {
  upstream_duration_[upstream].Observe(seconds);
}

void ThreadMetrics::RecordUpstreamFailure(int upstream, UpstreamFailure failure) {
  Bump(upstream_failures_[upstream * kUpstreamFailures + static_cast<int>(failure)]);
}

void ThreadMetrics::RecordStore(StoreKindLabel store, double seconds) {
  // The local store decides within the event loop's turn: no loop time
  // passes, so there is nothing to observe.
  if (store == StoreKindLabel::kRedis) redis_duration_.Observe(seconds);
}

void ThreadMetrics::RecordStoreError(StoreKindLabel store, StoreErrorKind kind) {
  Bump(store_errors_[static_cast<int>(store) * kStoreErrorKinds + static_cast<int>(kind)]);
}

void ThreadMetrics::RecordFallback(rules::StoreFailurePolicy policy) {
  Bump(fallbacks_[static_cast<int>(policy)]);
}

void StoreFailureCounter::OnStoreFailure(store::StoreStatus status, store::FailurePolicy policy) {
  metrics_.RecordStoreError(
      store_, status == store::StoreStatus::kTimeout       ? StoreErrorKind::kTimeout
              : status == store::StoreStatus::kUnavailable ? StoreErrorKind::kUnavailable
                                                           : StoreErrorKind::kError);
  metrics_.RecordFallback(policy);
}

void ThreadMetrics::AddConnections(int listener, int delta) {
  auto& c = connections_[listener];
  c.store(c.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
}

void ThreadMetrics::RecordTlsHandshake(int listener, HandshakeResult result) {
  Bump(tls_handshakes_[listener * kHandshakeResults + static_cast<int>(result)]);
}

void ThreadMetrics::RecordTlsHandshakeFailure(int listener, HandshakeFailure reason) {
  Bump(tls_handshake_failures_[listener * kHandshakeFailures + static_cast<int>(reason)]);
}

void ThreadMetrics::AddDelayed(int delta) {
  delayed_.store(delayed_.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
}

void ThreadMetrics::AddWebSockets(int route, int delta) {
  auto& c = websockets_[route];
  c.store(c.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
}

void ThreadMetrics::AddWebSocketBytes(int route, TunnelDirection direction,
                                      std::uint64_t bytes) {
  auto& c = websocket_bytes_[route * 2 + (direction == TunnelDirection::kIn ? 0 : 1)];
  c.store(c.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
}

void ThreadMetrics::AddHttp2Streams(int delta) {
  http2_streams_.store(http2_streams_.load(std::memory_order_relaxed) + delta,
                       std::memory_order_relaxed);
}

void ThreadMetrics::RecordDecisionRequest(DecisionProtocol protocol) {
  Bump(decision_requests_[static_cast<int>(protocol)]);
}

void ThreadMetrics::RecordGrpcResponse(int route, int grpc_status) {
  constexpr int kUnknown = 2;
  if (grpc_status < 0 || grpc_status >= kGrpcStatuses) grpc_status = kUnknown;
  Bump(grpc_responses_[route * kGrpcStatuses + grpc_status]);
}

Metrics::Metrics(std::size_t threads, std::string version) : version_(std::move(version)) {
  for (std::size_t i = 0; i < threads; ++i) threads_.push_back(std::make_unique<ThreadMetrics>());
}

int Metrics::Intern(std::vector<std::string>& names, std::string_view name) {
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<int>(i);
  }
  if (names.size() + 1 >= static_cast<std::size_t>(kMaxNames)) {
    if (names.size() + 1 == static_cast<std::size_t>(kMaxNames)) names.emplace_back("_other");
    return kMaxNames - 1;
  }
  names.emplace_back(name);
  return static_cast<int>(names.size() - 1);
}

void ThreadMetrics::RecordLimitedKey(std::string_view key) {
  std::lock_guard lock(tally_mutex_);
  if (auto it = tally_.counts.find(key); it != tally_.counts.end()) {
    ++it->second;
  } else if (tally_.counts.size() < kMaxTrackedKeys) {
    tally_.counts.emplace(key, 1);
  } else {
    ++tally_.untracked;
  }
}

void Metrics::RecordReload(bool success, double unix_seconds, std::string_view error) {
  std::lock_guard lock(mutex_);
  ++(success ? reloads_.ok : reloads_.failed);
  reloads_.last_attempt = unix_seconds;
  reloads_.last_ok = success;
  reloads_.last_error = success ? std::string() : std::string(error);
}

std::string_view HandshakeFailureName(HandshakeFailure reason) {
  return kHandshakeFailureNames[static_cast<int>(reason)];
}

std::string_view AdminChangeName(AdminChange change) {
  switch (change) {
    case AdminChange::kReset:
      return "reset";
    case AdminChange::kBlock:
      return "block";
    case AdminChange::kUnblock:
      return "unblock";
    case AdminChange::kOverride:
      return "override";
    case AdminChange::kOverrideRemoved:
      return "override_removed";
  }
  return "";
}

void Metrics::RecordAdminChange(AdminChange change) {
  std::lock_guard lock(mutex_);
  ++admin_changes_[static_cast<std::size_t>(change)];
}

void Metrics::ConfigInForce(double unix_seconds) {
  std::lock_guard lock(mutex_);
  reloads_.last_success = unix_seconds;
}

Metrics::ReloadStatus Metrics::Reloads() const {
  std::lock_guard lock(mutex_);
  return reloads_;
}

Metrics::Counts Metrics::Snapshot() const {
  Counts c;
  {
    std::lock_guard lock(mutex_);
    c.rules = rules_;
    c.upstreams = upstreams_;
  }
  c.decisions.resize(c.rules.size());
  for (std::size_t r = 0; r < c.rules.size(); ++r) {
    for (int k = 0; k < kDecisionKinds; ++k) {
      c.decisions[r][k] =
          Sum([&](const ThreadMetrics& t) { return Load(t.decisions_[r * kDecisionKinds + k]); });
    }
  }
  for (std::size_t u = 0; u < c.upstreams.size(); ++u) {
    c.upstream_responses.push_back(Merged([&](const ThreadMetrics& t) -> const Histogram& {
                                     return t.upstream_duration_[u];
                                   }).count());
    c.upstream_failures.push_back(Sum([&](const ThreadMetrics& t) {
      std::uint64_t n = 0;
      for (int k = 0; k < kUpstreamFailures; ++k) {
        n += Load(t.upstream_failures_[u * kUpstreamFailures + k]);
      }
      return n;
    }));
  }
  return c;
}

ThreadMetrics::KeyTally Metrics::TakeLimitedKeys() {
  ThreadMetrics::KeyTally merged;
  for (const auto& t : threads_) {
    ThreadMetrics::KeyTally taken;
    {
      std::lock_guard lock(t->tally_mutex_);
      std::swap(taken, t->tally_);
    }
    for (auto& [key, n] : taken.counts) merged.counts[key] += n;
    merged.untracked += taken.untracked;
  }
  return merged;
}

std::string Metrics::Render(const ExternalGauges& external) const {
  std::lock_guard lock(mutex_);
  std::string out;
  out.reserve(64 * 1024);
  MetricsWriter w(out, "tollgate_");
  const auto label = [](std::string_view key, std::string_view value) {
    return fmt::format("{}=\"{}\"", key, Escape(value));
  };

  w.Family("build_info", "gauge", "Always 1; the version label says which tollgate runs.");
  w.Sample("build_info", label("version", version_), 1);

  w.Family("requests_total", "counter", "Requests answered, by route and HTTP status code.");
  for (std::size_t r = 0; r < routes_.size(); ++r) {
    for (int s = 0; s < ThreadMetrics::kStatuses; ++s) {
      const std::uint64_t n = Sum([&](const ThreadMetrics& t) {
        return Load(t.requests_[r * ThreadMetrics::kStatuses + s]);
      });
      if (n == 0) continue;
      w.Sample("requests_total", label("route", routes_[r]) + fmt::format(",code=\"{}\"", s + 100),
               n);
    }
  }

  w.Family("request_duration_seconds", "histogram",
           "Time from the first byte of a request to the end of its response, by route.");
  for (std::size_t r = 0; r < routes_.size(); ++r) {
    const Histogram::Snapshot h =
        Merged([&](const ThreadMetrics& t) -> const Histogram& { return t.request_duration_[r]; });
    if (h.count() > 0) w.Histogram("request_duration_seconds", label("route", routes_[r]), h);
  }

  w.Family("ratelimit_decisions_total", "counter",
           "Rate-limit decisions, by rule and decision (allowed, limited, delayed, dry_run, "
           "exempt, error).");
  for (std::size_t r = 0; r < rules_.size(); ++r) {
    for (int k = 0; k < kDecisionKinds; ++k) {
      const std::uint64_t n =
          Sum([&](const ThreadMetrics& t) { return Load(t.decisions_[r * kDecisionKinds + k]); });
      w.Sample("ratelimit_decisions_total",
               label("rule", rules_[r]) + "," + label("decision", kDecisionNames[k]), n);
    }
  }

  w.Family("upstream_duration_seconds", "histogram",
           "Time from sending a request upstream to the end of its response, by upstream.");
  for (std::size_t u = 0; u < upstreams_.size(); ++u) {
    const Histogram::Snapshot h =
        Merged([&](const ThreadMetrics& t) -> const Histogram& { return t.upstream_duration_[u]; });
    if (h.count() > 0)
      w.Histogram("upstream_duration_seconds", label("upstream", upstreams_[u]), h);
  }

  w.Family("upstream_errors_total", "counter",
           "Upstream exchanges that failed, by upstream and kind (connect, timeout, reset).");
  for (std::size_t u = 0; u < upstreams_.size(); ++u) {
    for (int k = 0; k < kUpstreamFailures; ++k) {
      const std::uint64_t n = Sum([&](const ThreadMetrics& t) {
        return Load(t.upstream_failures_[u * kUpstreamFailures + k]);
      });
      w.Sample("upstream_errors_total",
               label("upstream", upstreams_[u]) + "," + label("kind", kUpstreamFailureNames[k]), n);
    }
  }

  const int store = external.redis ? 1 : 0;
  if (external.redis) {
    w.Family("store_duration_seconds", "histogram",
             "Time to get a request's rate-limit decisions from Redis.");
    const Histogram::Snapshot h =
        Merged([&](const ThreadMetrics& t) -> const Histogram& { return t.redis_duration_; });
    w.Histogram("store_duration_seconds", label("store", kStoreNames[store]), h);
  }
  w.Family("store_errors_total", "counter",
           "Decisions the store could not make, by kind (timeout, unavailable, error).");
  for (int k = 0; k < kStoreErrorKinds; ++k) {
    const std::uint64_t n = Sum([&](const ThreadMetrics& t) {
      return Load(t.store_errors_[store * kStoreErrorKinds + k]);
    });
    w.Sample("store_errors_total",
             label("store", kStoreNames[store]) + "," + label("kind", kStoreErrorNames[k]), n);
  }
  w.Family("store_fallback_total", "counter",
           "Decisions made by the on_error policy because the store could not decide.");
  for (int p = 0; p < store::kFailurePolicies; ++p) {
    const std::uint64_t n = Sum([&](const ThreadMetrics& t) { return Load(t.fallbacks_[p]); });
    w.Sample("store_fallback_total", label("policy", kPolicyNames[p]), n);
  }
  w.Family("store_circuit_open", "gauge",
           "Redis connections whose circuit breaker is open (0 with the local store).");
  w.Sample("store_circuit_open", "", external.redis_circuits_open);
  w.Family("store_batched_decisions_total", "counter",
           "Redis decisions that shared an earlier decision's script call (0 with the local "
           "store).");
  w.Sample("store_batched_decisions_total", "", external.redis_batched_decisions);
  if (external.cluster_gateways > 0) {
    w.Family("cluster_gateways", "gauge",
             "Gateways alive on this Redis store, this one included (membership heartbeats).");
    w.Sample("cluster_gateways", "", external.cluster_gateways);
  }
  w.Family("local_store_keys", "gauge", "Keys held by the local store.");
  w.Sample("local_store_keys", "", external.local_store_keys);
  w.Family("local_store_evictions_total", "counter",
           "Keys the local store evicted to stay within max_keys, by rule (a rule's keys are "
           "evicted only to make room for keys of the same rule).");
  for (const auto& [id, n] : external.local_store_rule_evictions) {
    w.Sample("local_store_evictions_total", label("rule", rules_[static_cast<std::size_t>(id)]), n);
  }

  const std::int64_t delayed =
      Sum([](const ThreadMetrics& t) { return t.delayed_.load(std::memory_order_relaxed); });
  w.Family("delayed_requests", "gauge", "Requests held right now by delay and shaping.");
  w.Sample("delayed_requests", "", delayed);
  w.Family("active_connections", "gauge", "Client connections open right now, by listener.");
  for (std::size_t l = 0; l < listeners_.size(); ++l) {
    const std::int64_t n = Sum(
        [&](const ThreadMetrics& t) { return t.connections_[l].load(std::memory_order_relaxed); });
    w.Sample("active_connections", label("listener", listeners_[l]), n);
  }
  // A counter per listener and reason: `counts` is [listener][reason], the
  // reasons named by `names`; samples that are 0 are left out.
  const auto per_listener =
      [&](std::string_view family, std::string_view key, std::span<const std::string_view> names,
          std::unique_ptr<std::atomic<std::uint64_t>[]> ThreadMetrics::*counts) {
        for (std::size_t l = 0; l < listeners_.size(); ++l) {
          for (std::size_t r = 0; r < names.size(); ++r) {
            const std::uint64_t n = Sum(
                [&](const ThreadMetrics& t) { return Load((t.*counts)[l * names.size() + r]); });
            if (n == 0) continue;
            w.Sample(family, label("listener", listeners_[l]) + "," + label(key, names[r]), n);
          }
        }
      };
  w.Family("tls_handshakes_total", "counter",
           "TLS handshakes with clients, by listener and result (ok: full, resumed: by a session "
           "ticket or ID, failed).");
  per_listener("tls_handshakes_total", "result", kHandshakeNames, &ThreadMetrics::tls_handshakes_);
  w.Family("tls_handshake_failures_total", "counter",
           "Failed TLS handshakes with clients, by listener and reason (no_certificate, "
           "certificate_expired, certificate_revoked, unknown_ca, bad_certificate, protocol, "
           "timeout, closed).");
  per_listener("tls_handshake_failures_total", "reason", kHandshakeFailureNames,
               &ThreadMetrics::tls_handshake_failures_);
  if (!external.leases.empty()) {
    using store::LeaseStats;
    w.Family("lease_requests_total", "counter",
             "Lease takes sent to Redis (sync = \"lease\"), by rule and result.");
    for (const LeaseStats::Counts& c : external.leases) {
      for (int i = 0; i < LeaseStats::kResults; ++i) {
        w.Sample("lease_requests_total",
                 label("rule", c.rule) + "," + label("result", LeaseStats::kResultNames[i]),
                 c.requests[i]);
      }
    }
    w.Family("lease_units_total", "counter",
             "Units of leases granted by Redis, used for admitted requests, and returned unused.");
    for (const LeaseStats::Counts& c : external.leases) {
      for (int i = 0; i < LeaseStats::kUnitKinds; ++i) {
        w.Sample("lease_units_total",
                 label("rule", c.rule) + "," + label("kind", LeaseStats::kUnitNames[i]),
                 c.units[i]);
      }
    }
    w.Family("lease_units_in_hand", "gauge", "Units of leases this gateway holds now, unused.");
    for (const LeaseStats::Counts& c : external.leases) {
      w.Sample("lease_units_in_hand", label("rule", c.rule), c.in_hand);
    }
  }
  w.Family(
      "tls_certificate_expiry_timestamp_seconds", "gauge",
      "When each listener certificate expires (Unix time, its notAfter), by certificate file.");
  for (const auto& [file, not_after] : external.certificate_expiry) {
    w.Sample("tls_certificate_expiry_timestamp_seconds", label("certificate", file), not_after);
  }

  w.Family("websocket_connections", "gauge", "WebSocket tunnels open right now, by route.");
  const auto routed = [&](std::size_t r) { return routes_[r] != "_unrouted"; };
  for (std::size_t r = 0; r < routes_.size(); ++r) {
    if (!routed(r)) continue;
    const std::int64_t n = Sum(
        [&](const ThreadMetrics& t) { return t.websockets_[r].load(std::memory_order_relaxed); });
    w.Sample("websocket_connections", label("route", routes_[r]), n);
  }
  w.Family("websocket_bytes_total", "counter",
           "Bytes carried by WebSocket tunnels, by route and direction (in: client to upstream, "
           "out: upstream to client).");
  for (std::size_t r = 0; r < routes_.size(); ++r) {
    if (!routed(r)) continue;
    for (int d = 0; d < 2; ++d) {
      const std::uint64_t n =
          Sum([&](const ThreadMetrics& t) { return Load(t.websocket_bytes_[r * 2 + d]); });
      w.Sample("websocket_bytes_total",
               label("route", routes_[r]) + "," + label("direction", d == 0 ? "in" : "out"), n);
    }
  }

  w.Family("http2_streams", "gauge", "HTTP/2 client streams being served right now.");
  w.Sample("http2_streams", "", Sum([](const ThreadMetrics& t) {
             return t.http2_streams_.load(std::memory_order_relaxed);
           }));
  w.Family("grpc_responses_total", "counter",
           "gRPC calls answered, by route and grpc-status (tollgate's own answers and the "
           "upstream's); only statuses seen are listed.");
  for (std::size_t r = 0; r < routes_.size(); ++r) {
    for (int g = 0; g < kGrpcStatuses; ++g) {
      const std::uint64_t n = Sum(
          [&](const ThreadMetrics& t) { return Load(t.grpc_responses_[r * kGrpcStatuses + g]); });
      if (n == 0) continue;
      w.Sample("grpc_responses_total",
               label("route", routes_[r]) + "," + label("grpc_status", std::to_string(g)), n);
    }
  }

  w.Family("decision_requests_total", "counter",
           "Requests answered by the decision service ([decision]), by protocol: http (the "
           "check endpoint), rls (Envoy's ShouldRateLimit).");
  for (int p = 0; p < 2; ++p) {
    w.Sample("decision_requests_total", label("protocol", p == 0 ? "http" : "rls"),
             Sum([&](const ThreadMetrics& t) { return Load(t.decision_requests_[p]); }));
  }

  w.Family("config_reloads_total", "counter", "Configuration reloads, by result.");
  w.Sample("config_reloads_total", "result=\"success\"", reloads_.ok);
  w.Sample("config_reloads_total", "result=\"failure\"", reloads_.failed);
  w.Family("config_last_reload_success_timestamp_seconds", "gauge",
           "Unix time of the last configuration that took effect (startup included).");
  w.Sample("config_last_reload_success_timestamp_seconds", "", reloads_.last_success);
  w.Family("admin_changes_total", "counter",
           "Changes made through the admin API (key resets, blocks and overrides set or "
           "removed), by kind.");
  for (int k = 0; k < kAdminChanges; ++k) {
    w.Sample("admin_changes_total", label("kind", AdminChangeName(static_cast<AdminChange>(k))),
             admin_changes_[static_cast<std::size_t>(k)]);
  }
  if (const std::optional<ProcessStats> process = ReadProcessStats()) {
    AppendProcessMetrics(*process, out);
  }
  return out;
}

}  // namespace tollgate::gateway
