// The metric families tollgate exports on /metrics, described once, as
// Envoy's stats macros do: TOLLGATE_METRIC_FAMILIES lists each family's
// name (after "tollgate_"), type, when it is exported, HELP text and label
// names (a histogram's `le` aside), in the order a scrape lists them. The
// scrape (WriteMetricFamilies) writes HELP, TYPE and label names from this
// table only, and tests/docs/metric_names_test.py checks docs/metrics.md
// against it. The label values fixed by tollgate are the tables below it.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gateway/telemetry/thread_metrics.h"
#include "store/lease_stats.h"

namespace tollgate::gateway {

// F(Id, name, type, exported, help, label names...)
// clang-format off
#define TOLLGATE_METRIC_FAMILIES(F)                                                              \
  F(BuildInfo, "build_info", kGauge, kAlways,                                                    \
    "Always 1; the version label says which tollgate runs.", "version")                          \
  F(Requests, "requests_total", kCounter, kAlways,                                               \
    "Requests answered, by route and HTTP status code.", "route", "code")                        \
  F(RequestDuration, "request_duration_seconds", kHistogram, kAlways,                            \
    "Time from the first byte of a request to the end of its response, by route.", "route")      \
  F(Decisions, "ratelimit_decisions_total", kCounter, kAlways,                                   \
    "Rate-limit decisions, by rule and decision (allowed, limited, delayed, dry_run, exempt, "   \
    "error).",                                                                                   \
    "rule", "decision")                                                                          \
  F(Costs, "ratelimit_cost_total", kCounter, kAlways,                                            \
    "Units of the rules that settle from the response (token budgets), by rule and phase "       \
    "(reserved at admission, settled to the response's cost, refunded of a reservation).",      \
    "rule", "phase")                                                                             \
  F(UpstreamDuration, "upstream_duration_seconds", kHistogram, kAlways,                          \
    "Time from sending a request upstream to the end of its response, by upstream.", "upstream") \
  F(UpstreamErrors, "upstream_errors_total", kCounter, kAlways,                                  \
    "Upstream exchanges that failed, by upstream and kind (connect, timeout, reset).",           \
    "upstream", "kind")                                                                          \
  F(UpstreamConcurrencyLimit, "upstream_concurrency_limit", kGauge, kAlways,                     \
    "Requests an upstream with a concurrency limit takes in flight now (its fixed concurrency "  \
    "or its adaptive limit), by upstream.",                                                      \
    "upstream")                                                                                  \
  F(UpstreamConcurrencyInflight, "upstream_concurrency_inflight", kGauge, kAlways,               \
    "Requests in flight now towards an upstream with a concurrency limit, by upstream.",         \
    "upstream")                                                                                  \
  F(StoreDuration, "store_duration_seconds", kHistogram, kWithRedis,                             \
    "Time to get a request's rate-limit decisions from Redis.", "store")                         \
  F(StoreErrors, "store_errors_total", kCounter, kAlways,                                        \
    "Decisions the store could not make, by kind (timeout, unavailable, error).", "store",       \
    "kind")                                                                                      \
  F(StoreFallback, "store_fallback_total", kCounter, kAlways,                                    \
    "Decisions made by the on_error policy because the store could not decide.", "policy")       \
  F(StoreCircuitOpen, "store_circuit_open", kGauge, kAlways,                                     \
    "Redis connections whose circuit breaker is open (0 with the local store).")                 \
  F(StoreBatchedDecisions, "store_batched_decisions_total", kCounter, kAlways,                   \
    "Redis decisions that shared an earlier decision's script call (0 with the local store).")   \
  F(ClusterGateways, "cluster_gateways", kGauge, kWithFleet,                                     \
    "Gateways alive on this Redis store, this one included (membership heartbeats).")            \
  F(LocalStoreKeys, "local_store_keys", kGauge, kAlways, "Keys held by the local store.")        \
  F(LocalStoreEvictions, "local_store_evictions_total", kCounter, kAlways,                       \
    "Keys the local store evicted to stay within max_keys, by rule (a rule's keys are evicted "  \
    "only to make room for keys of the same rule).",                                             \
    "rule")                                                                                      \
  F(DelayedRequests, "delayed_requests", kGauge, kAlways,                                        \
    "Requests held right now by delay and shaping.")                                             \
  F(ActiveConnections, "active_connections", kGauge, kAlways,                                    \
    "Client connections open right now, by listener.", "listener")                               \
  F(TlsHandshakes, "tls_handshakes_total", kCounter, kAlways,                                    \
    "TLS handshakes with clients, by listener and result (ok: full, resumed: by a session "      \
    "ticket or ID, failed).",                                                                    \
    "listener", "result")                                                                        \
  F(TlsHandshakeFailures, "tls_handshake_failures_total", kCounter, kAlways,                     \
    "Failed TLS handshakes with clients, by listener and reason (no_certificate, "               \
    "certificate_expired, certificate_revoked, unknown_ca, bad_certificate, protocol, "          \
    "timeout, closed).",                                                                         \
    "listener", "reason")                                                                        \
  F(LeaseRequests, "lease_requests_total", kCounter, kWithLeases,                                \
    "Lease takes sent to Redis (sync = \"lease\"), by rule and result.", "rule", "result")       \
  F(LeaseUnits, "lease_units_total", kCounter, kWithLeases,                                      \
    "Units of leases granted by Redis, used for admitted requests, and returned unused.",        \
    "rule", "kind")                                                                              \
  F(LeaseUnitsInHand, "lease_units_in_hand", kGauge, kWithLeases,                                \
    "Units of leases this gateway holds now, unused.", "rule")                                   \
  F(TlsCertificateExpiry, "tls_certificate_expiry_timestamp_seconds", kGauge, kAlways,           \
    "When each listener certificate expires (Unix time, its notAfter), by certificate file.",    \
    "certificate")                                                                               \
  F(WebSocketConnections, "websocket_connections", kGauge, kAlways,                              \
    "WebSocket tunnels open right now, by route.", "route")                                      \
  F(WebSocketBytes, "websocket_bytes_total", kCounter, kAlways,                                  \
    "Bytes carried by WebSocket tunnels, by route and direction (in: client to upstream, "       \
    "out: upstream to client).",                                                                 \
    "route", "direction")                                                                        \
  F(Http2Streams, "http2_streams", kGauge, kAlways,                                              \
    "HTTP/2 client streams being served right now.")                                             \
  F(GrpcResponses, "grpc_responses_total", kCounter, kAlways,                                    \
    "gRPC calls answered, by route and grpc-status (tollgate's own answers and the "             \
    "upstream's); only statuses seen are listed.",                                               \
    "route", "grpc_status")                                                                      \
  F(DecisionRequests, "decision_requests_total", kCounter, kAlways,                              \
    "Requests answered by the decision service ([decision]), by protocol: http (the check "      \
    "endpoint), rls (Envoy's ShouldRateLimit).",                                                 \
    "protocol")                                                                                  \
  F(ConfigReloads, "config_reloads_total", kCounter, kAlways,                                    \
    "Configuration reloads, by result.", "result")                                               \
  F(ConfigLastReloadSuccess, "config_last_reload_success_timestamp_seconds", kGauge, kAlways,    \
    "Unix time of the last configuration that took effect (startup included).")                  \
  F(AdminChanges, "admin_changes_total", kCounter, kAlways,                                      \
    "Changes made through the admin API (key resets, blocks and overrides set or removed), by "  \
    "kind.",                                                                                     \
    "kind")
// clang-format on

enum class MetricType : std::uint8_t { kCounter, kGauge, kHistogram };
// When a family is on /metrics at all (its HELP and TYPE lines included).
enum class Exported : std::uint8_t {
  kAlways,
  kWithRedis,   // the Redis store is in force
  kWithFleet,   // gateways counted by membership heartbeats (Redis)
  kWithLeases,  // a rule with sync = "lease" has been used
};

struct MetricFamily {
  std::string_view name;  // after "tollgate_"
  MetricType type;
  Exported exported;
  std::string_view help;
  std::array<std::string_view, 2> labels;  // the first `label_count`
  std::size_t label_count = 0;
};

template <typename... Labels>
constexpr MetricFamily Family(std::string_view name, MetricType type, Exported exported,
                              std::string_view help, Labels... labels) {
  static_assert(sizeof...(Labels) <= 2);
  return {name, type, exported, help, {labels...}, sizeof...(Labels)};
}

inline constexpr MetricFamily kMetricFamilies[] = {
#define TOLLGATE_METRIC_FAMILY(id, name, type, exported, help, ...) \
  Family(name, MetricType::type, Exported::exported, help __VA_OPT__(, ) __VA_ARGS__),
    TOLLGATE_METRIC_FAMILIES(TOLLGATE_METRIC_FAMILY)
#undef TOLLGATE_METRIC_FAMILY
};

// Label values, by the enums' order.
inline constexpr std::string_view kDecisionNames[kDecisionKinds] = {"allowed", "limited", "delayed",
                                                                    "dry_run", "exempt",  "error"};
inline constexpr std::string_view kCostPhaseNames[kCostPhases] = {"reserved", "settled",
                                                                   "refunded"};
inline constexpr std::string_view kUpstreamFailureNames[kUpstreamFailures] = {"connect", "timeout",
                                                                              "reset"};
inline constexpr std::string_view kStoreNames[2] = {"local", "redis"};
inline constexpr std::string_view kStoreErrorNames[kStoreErrorKinds] = {"timeout", "unavailable",
                                                                        "error"};
inline constexpr std::string_view kPolicyNames[store::kFailurePolicies] = {"allow", "deny", "local",
                                                                           "share"};
inline constexpr std::string_view kHandshakeNames[kHandshakeResults] = {"ok", "failed", "resumed"};
inline constexpr std::string_view kHandshakeFailureNames[kHandshakeFailures] = {
    "no_certificate",
    "certificate_expired",
    "certificate_revoked",
    "unknown_ca",
    "bad_certificate",
    "protocol",
    "timeout",
    "closed"};
inline constexpr std::string_view kAdminChangeNames[kAdminChanges] = {
    "reset", "block", "unblock", "override", "override_removed"};
inline constexpr std::string_view kDirectionNames[2] = {"in", "out"};
inline constexpr std::string_view kDecisionProtocolNames[2] = {"http", "rls"};

// An upstream with a concurrency limit (fixed or adaptive), as a scrape
// and the status page read it.
struct UpstreamConcurrency {
  std::string upstream;
  bool adaptive = false;
  std::int64_t limit = 0;
  std::int64_t inflight = 0;
  std::int64_t min_latency_us = 0;  // adaptive: its reference latency; 0: none yet
};

// Values kept elsewhere, read at scrape time.
struct ExternalGauges {
  std::int64_t local_store_keys = 0;
  // Evictions by rule label id (RuleId): each rule's own keys evicted to
  // stay within its share, since the rule got its partition.
  std::vector<std::pair<int, std::uint64_t>> local_store_rule_evictions;
  bool redis = false;
  std::int64_t redis_circuits_open = 0;
  // The leased rules' counts (sync = "lease"; store/lease_stats.h).
  std::vector<store::LeaseStats::Counts> leases;
  // The listeners' certificates: file and the Unix time they expire.
  std::vector<std::pair<std::string, std::int64_t>> certificate_expiry;
  std::uint64_t redis_batched_decisions = 0;
  // The live gateways on the Redis store (gateway/admin/membership.h); 0
  // with the local store: not rendered.
  std::int64_t cluster_gateways = 0;
  std::vector<UpstreamConcurrency> upstream_concurrency;
};

// What one scrape reads (gateway/telemetry/metrics.h gathers it under its lock).
struct Scrape {
  std::vector<const ThreadCounters*> threads;
  // The names of the label ids, by id.
  const std::vector<std::string>& routes;
  const std::vector<std::string>& rules;
  const std::vector<std::string>& upstreams;
  const std::vector<std::string>& listeners;
  const ExternalGauges& external;
  std::string_view version;
  std::uint64_t reloads_ok = 0, reloads_failed = 0;
  double last_reload_success = 0;  // Unix seconds
  std::span<const std::uint64_t, kAdminChanges> admin_changes;
};

// Appends the families of kMetricFamilies exported for `scrape`, in the
// table's order, in Prometheus's text exposition format 0.0.4.
void WriteMetricFamilies(const Scrape& scrape, std::string& out);

}  // namespace tollgate::gateway
