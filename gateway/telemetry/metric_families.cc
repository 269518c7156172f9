#include "gateway/telemetry/metric_families.h"

#include <fmt/format.h>

#include <cassert>

#include "gateway/telemetry/metrics_writer.h"

namespace tollgate::gateway {
namespace {

constexpr std::string_view kTypeNames[] = {"counter", "gauge", "histogram"};

std::uint64_t Load(const std::atomic<std::uint64_t>& a) {
  return a.load(std::memory_order_relaxed);
}

std::int64_t Load(const std::atomic<std::int64_t>& a) { return a.load(std::memory_order_relaxed); }

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

// The samples of one family: label names from the table, values given in
// the same order.
class FamilyWriter {
 public:
  FamilyWriter(MetricsWriter& out, const MetricFamily& family) : out_(out), family_(family) {
    out_.Family(family.name, kTypeNames[static_cast<int>(family.type)], family.help);
  }
  template <typename V, typename... Values>
  void Sample(V value, Values... values) {
    out_.Sample(family_.name, Labels({values...}), value);
  }
  template <typename... Values>
  void Histogram(const Histogram::Snapshot& h, Values... values) {
    out_.Histogram(family_.name, Labels({values...}), h);
  }

 private:
  std::string Labels(std::initializer_list<std::string_view> values) const {
    assert(values.size() == family_.label_count);
    std::string labels;
    std::size_t i = 0;
    for (std::string_view value : values) {
      if (i > 0) labels += ',';
      labels += fmt::format("{}=\"{}\"", family_.labels[i++], Escape(value));
    }
    return labels;
  }
  MetricsWriter& out_;
  const MetricFamily& family_;
};

// `value(counters)` summed over the threads.
template <typename F>
auto Sum(const Scrape& s, F value) {
  decltype(value(*s.threads.front())) total{};
  for (const ThreadCounters* t : s.threads) total += value(*t);
  return total;
}

// The histogram `pick(counters)` merged over the threads.
template <typename F>
Histogram::Snapshot Merged(const Scrape& s, F pick) {
  Histogram::Snapshot merged;
  for (const ThreadCounters* t : s.threads) merged.Add(pick(*t));
  return merged;
}

// A counter per listener and reason: `counts` is [listener][reason], the
// reasons named by `names`; samples that are 0 are left out.
void PerListener(const Scrape& s, FamilyWriter& w, std::span<const std::string_view> names,
                 std::unique_ptr<std::atomic<std::uint64_t>[]> ThreadCounters::*counts) {
  for (std::size_t l = 0; l < s.listeners.size(); ++l) {
    for (std::size_t r = 0; r < names.size(); ++r) {
      const std::uint64_t n =
          Sum(s, [&](const ThreadCounters& t) { return Load((t.*counts)[l * names.size() + r]); });
      if (n > 0) w.Sample(n, s.listeners[l], names[r]);
    }
  }
}

// A histogram per route or upstream: `histograms` is [id], named by
// `names`; histograms with no observation are left out.
void PerName(const Scrape& s, FamilyWriter& w, const std::vector<std::string>& names,
             std::unique_ptr<Histogram[]> ThreadCounters::*histograms) {
  for (std::size_t i = 0; i < names.size(); ++i) {
    const Histogram::Snapshot h =
        Merged(s, [&](const ThreadCounters& t) -> const Histogram& { return (t.*histograms)[i]; });
    if (h.count() > 0) w.Histogram(h, names[i]);
  }
}

bool Routed(const Scrape& s, std::size_t route) { return s.routes[route] != "_unrouted"; }

// One function per family, named after its id in TOLLGATE_METRIC_FAMILIES.
void WriteBuildInfo(const Scrape& s, FamilyWriter& w) { w.Sample(1, s.version); }

void WriteRequests(const Scrape& s, FamilyWriter& w) {
  for (std::size_t r = 0; r < s.routes.size(); ++r) {
    for (int code = 0; code < ThreadCounters::kStatuses; ++code) {
      const std::uint64_t n = Sum(s, [&](const ThreadCounters& t) {
        return Load(t.requests[r * ThreadCounters::kStatuses + code]);
      });
      if (n > 0) w.Sample(n, s.routes[r], std::to_string(code + 100));
    }
  }
}

void WriteRequestDuration(const Scrape& s, FamilyWriter& w) {
  PerName(s, w, s.routes, &ThreadCounters::request_duration);
}

void WriteDecisions(const Scrape& s, FamilyWriter& w) {
  for (std::size_t r = 0; r < s.rules.size(); ++r) {
    for (int k = 0; k < kDecisionKinds; ++k) {
      w.Sample(
          Sum(s,
              [&](const ThreadCounters& t) { return Load(t.decisions[r * kDecisionKinds + k]); }),
          s.rules[r], kDecisionNames[k]);
    }
  }
}

// Only the rules that settle have costs: the others write no sample.
void WriteCosts(const Scrape& s, FamilyWriter& w) {
  for (std::size_t r = 0; r < s.rules.size(); ++r) {
    for (int k = 0; k < kCostPhases; ++k) {
      const std::uint64_t n =
          Sum(s, [&](const ThreadCounters& t) { return Load(t.costs[r * kCostPhases + k]); });
      if (n > 0) w.Sample(n, s.rules[r], kCostPhaseNames[k]);
    }
  }
}

void WriteUpstreamDuration(const Scrape& s, FamilyWriter& w) {
  PerName(s, w, s.upstreams, &ThreadCounters::upstream_duration);
}

void WriteUpstreamErrors(const Scrape& s, FamilyWriter& w) {
  for (std::size_t u = 0; u < s.upstreams.size(); ++u) {
    for (int k = 0; k < kUpstreamFailures; ++k) {
      w.Sample(Sum(s,
                   [&](const ThreadCounters& t) {
                     return Load(t.upstream_failures[u * kUpstreamFailures + k]);
                   }),
               s.upstreams[u], kUpstreamFailureNames[k]);
    }
  }
}

void WriteUpstreamConcurrencyLimit(const Scrape& s, FamilyWriter& w) {
  for (const UpstreamConcurrency& u : s.external.upstream_concurrency) {
    w.Sample(u.limit, u.upstream);
  }
}

void WriteUpstreamConcurrencyInflight(const Scrape& s, FamilyWriter& w) {
  for (const UpstreamConcurrency& u : s.external.upstream_concurrency) {
    w.Sample(u.inflight, u.upstream);
  }
}

int StoreIndex(const Scrape& s) { return s.external.redis ? 1 : 0; }

void WriteStoreDuration(const Scrape& s, FamilyWriter& w) {
  w.Histogram(
      Merged(s, [](const ThreadCounters& t) -> const Histogram& { return t.redis_duration; }),
      kStoreNames[StoreIndex(s)]);
}

void WriteStoreErrors(const Scrape& s, FamilyWriter& w) {
  const int store = StoreIndex(s);
  for (int k = 0; k < kStoreErrorKinds; ++k) {
    w.Sample(Sum(s,
                 [&](const ThreadCounters& t) {
                   return Load(t.store_errors[store * kStoreErrorKinds + k]);
                 }),
             kStoreNames[store], kStoreErrorNames[k]);
  }
}

void WriteStoreFallback(const Scrape& s, FamilyWriter& w) {
  for (int p = 0; p < store::kFailurePolicies; ++p) {
    w.Sample(Sum(s, [&](const ThreadCounters& t) { return Load(t.fallbacks[p]); }),
             kPolicyNames[p]);
  }
}

void WriteStoreCircuitOpen(const Scrape& s, FamilyWriter& w) {
  w.Sample(s.external.redis_circuits_open);
}

void WriteStoreBatchedDecisions(const Scrape& s, FamilyWriter& w) {
  w.Sample(s.external.redis_batched_decisions);
}

void WriteClusterGateways(const Scrape& s, FamilyWriter& w) {
  w.Sample(s.external.cluster_gateways);
}

void WriteLocalStoreKeys(const Scrape& s, FamilyWriter& w) {
  w.Sample(s.external.local_store_keys);
}

void WriteLocalStoreEvictions(const Scrape& s, FamilyWriter& w) {
  for (const auto& [id, n] : s.external.local_store_rule_evictions) {
    w.Sample(n, s.rules[static_cast<std::size_t>(id)]);
  }
}

void WriteDelayedRequests(const Scrape& s, FamilyWriter& w) {
  w.Sample(Sum(s, [](const ThreadCounters& t) { return Load(t.delayed); }));
}

void WriteActiveConnections(const Scrape& s, FamilyWriter& w) {
  for (std::size_t l = 0; l < s.listeners.size(); ++l) {
    w.Sample(Sum(s, [&](const ThreadCounters& t) { return Load(t.connections[l]); }),
             s.listeners[l]);
  }
}

void WriteTlsHandshakes(const Scrape& s, FamilyWriter& w) {
  PerListener(s, w, kHandshakeNames, &ThreadCounters::tls_handshakes);
}

void WriteTlsHandshakeFailures(const Scrape& s, FamilyWriter& w) {
  PerListener(s, w, kHandshakeFailureNames, &ThreadCounters::tls_handshake_failures);
}

void WriteLeaseRequests(const Scrape& s, FamilyWriter& w) {
  for (const store::LeaseStats::Counts& c : s.external.leases) {
    for (int i = 0; i < store::LeaseStats::kResults; ++i) {
      w.Sample(c.requests[i], c.rule, store::LeaseStats::kResultNames[i]);
    }
  }
}

void WriteLeaseUnits(const Scrape& s, FamilyWriter& w) {
  for (const store::LeaseStats::Counts& c : s.external.leases) {
    for (int i = 0; i < store::LeaseStats::kUnitKinds; ++i) {
      w.Sample(c.units[i], c.rule, store::LeaseStats::kUnitNames[i]);
    }
  }
}

void WriteLeaseUnitsInHand(const Scrape& s, FamilyWriter& w) {
  for (const store::LeaseStats::Counts& c : s.external.leases) w.Sample(c.in_hand, c.rule);
}

void WriteTlsCertificateExpiry(const Scrape& s, FamilyWriter& w) {
  for (const auto& [file, not_after] : s.external.certificate_expiry) w.Sample(not_after, file);
}

void WriteWebSocketConnections(const Scrape& s, FamilyWriter& w) {
  for (std::size_t r = 0; r < s.routes.size(); ++r) {
    if (!Routed(s, r)) continue;
    w.Sample(Sum(s, [&](const ThreadCounters& t) { return Load(t.websockets[r]); }), s.routes[r]);
  }
}

void WriteWebSocketBytes(const Scrape& s, FamilyWriter& w) {
  for (std::size_t r = 0; r < s.routes.size(); ++r) {
    if (!Routed(s, r)) continue;
    for (int d = 0; d < 2; ++d) {
      w.Sample(Sum(s, [&](const ThreadCounters& t) { return Load(t.websocket_bytes[r * 2 + d]); }),
               s.routes[r], kDirectionNames[d]);
    }
  }
}

void WriteHttp2Streams(const Scrape& s, FamilyWriter& w) {
  w.Sample(Sum(s, [](const ThreadCounters& t) { return Load(t.http2_streams); }));
}

void WriteGrpcResponses(const Scrape& s, FamilyWriter& w) {
  for (std::size_t r = 0; r < s.routes.size(); ++r) {
    for (int g = 0; g < kGrpcStatuses; ++g) {
      const std::uint64_t n = Sum(s, [&](const ThreadCounters& t) {
        return Load(t.grpc_responses[r * kGrpcStatuses + g]);
      });
      if (n > 0) w.Sample(n, s.routes[r], std::to_string(g));
    }
  }
}

void WriteDecisionRequests(const Scrape& s, FamilyWriter& w) {
  for (int p = 0; p < 2; ++p) {
    w.Sample(Sum(s, [&](const ThreadCounters& t) { return Load(t.decision_requests[p]); }),
             kDecisionProtocolNames[p]);
  }
}

void WriteConfigReloads(const Scrape& s, FamilyWriter& w) {
  w.Sample(s.reloads_ok, "success");
  w.Sample(s.reloads_failed, "failure");
}

void WriteConfigLastReloadSuccess(const Scrape& s, FamilyWriter& w) {
  w.Sample(s.last_reload_success);
}

void WriteAdminChanges(const Scrape& s, FamilyWriter& w) {
  for (int k = 0; k < kAdminChanges; ++k) w.Sample(s.admin_changes[k], kAdminChangeNames[k]);
}

using WriteSamples = void (*)(const Scrape&, FamilyWriter&);
constexpr WriteSamples kWriters[] = {
#define TOLLGATE_METRIC_WRITER(id, ...) &Write##id,
    TOLLGATE_METRIC_FAMILIES(TOLLGATE_METRIC_WRITER)
#undef TOLLGATE_METRIC_WRITER
};
static_assert(std::size(kWriters) == std::size(kMetricFamilies));

bool IsExported(Exported when, const ExternalGauges& external) {
  switch (when) {
    case Exported::kAlways:
      return true;
    case Exported::kWithRedis:
      return external.redis;
    case Exported::kWithFleet:
      return external.cluster_gateways > 0;
    case Exported::kWithLeases:
      return !external.leases.empty();
  }
  return false;
}

}  // namespace

void WriteMetricFamilies(const Scrape& scrape, std::string& out) {
  MetricsWriter writer(out, "tollgate_");
  for (std::size_t i = 0; i < std::size(kMetricFamilies); ++i) {
    if (!IsExported(kMetricFamilies[i].exported, scrape.external)) continue;
    FamilyWriter family(writer, kMetricFamilies[i]);
    kWriters[i](scrape, family);
  }
}

}  // namespace tollgate::gateway
