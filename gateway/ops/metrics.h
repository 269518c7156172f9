// Prometheus metrics. Each worker thread writes only its own ThreadMetrics
// (relaxed atomic loads and stores, no read-modify-write, no lock, nothing
// shared between threads); a scrape sums the threads' values. Label values
// come from the configuration only (route, rule, upstream and listener
// names), interned once per name and bounded by kMaxNames.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gateway/io/handshake_result.h"
#include "rules/rule.h"
#include "store/failover_store.h"
#include "store/lease_stats.h"

namespace tollgate::gateway {

// Seconds: 100 µs ... 10 s.
inline constexpr std::array<double, 16> kDurationBuckets = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
    0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};

// A histogram with one writer thread and any number of readers.
class Histogram {
 public:
  void Observe(double seconds);
  struct Snapshot {
    std::array<std::uint64_t, kDurationBuckets.size() + 1> buckets{};  // not cumulative; last: +Inf
    double sum = 0;
    void Add(const Histogram& h);
    std::uint64_t count() const;
  };

 private:
  std::array<std::atomic<std::uint64_t>, kDurationBuckets.size() + 1> buckets_{};
  std::atomic<double> sum_{0};
};

enum class DecisionKind : std::uint8_t { kAllowed, kLimited, kDelayed, kDryRun, kExempt, kError };
inline constexpr int kDecisionKinds = 6;
enum class UpstreamFailure : std::uint8_t { kConnect, kTimeout, kReset };
inline constexpr int kUpstreamFailures = 3;
enum class StoreKindLabel : std::uint8_t { kLocal, kRedis };
// A change made through the admin API (gateway/ops/admin_audit.h).
enum class AdminChange : std::uint8_t { kReset, kBlock, kUnblock, kOverride, kOverrideRemoved };
inline constexpr int kAdminChanges = 5;
// Its `kind` label: "reset", "block", "unblock", "override",
// "override_removed".
std::string_view AdminChangeName(AdminChange change);
// Its `reason` label in tollgate_tls_handshake_failures_total:
// "no_certificate", "certificate_expired", "certificate_revoked",
// "unknown_ca", "bad_certificate", "protocol", "timeout", "closed".
std::string_view HandshakeFailureName(HandshakeFailure reason);
enum class StoreErrorKind : std::uint8_t { kTimeout, kUnavailable, kError };
inline constexpr int kStoreErrorKinds = 3;

// The protocol of a decision service request (gateway/decision/): the
// check endpoint, or Envoy's RLS.
enum class DecisionProtocol : std::uint8_t { kHttp, kRls };

// gRPC status codes 0..16 (OK .. UNAUTHENTICATED).
inline constexpr int kGrpcStatuses = 17;

inline constexpr int kMaxNames = 256;  // per kind of name; more share "_other"

// A WebSocket tunnel's direction: kIn client to upstream, kOut upstream to
// client (the `direction` label of tollgate_websocket_bytes_total).
enum class TunnelDirection { kIn, kOut };

// One worker's metrics. Record*() only from the owning thread.
class ThreadMetrics {
 public:
  ThreadMetrics();
  void RecordRequest(int route, unsigned status, double seconds);
  void RecordDecision(int rule, DecisionKind kind);
  void RecordUpstream(int upstream, double seconds);
  void RecordUpstreamFailure(int upstream, UpstreamFailure failure);
  // The time the store took to decide (observed for Redis only).
  void RecordStore(StoreKindLabel store, double seconds);
  void RecordStoreError(StoreKindLabel store, StoreErrorKind kind);
  void RecordFallback(rules::StoreFailurePolicy policy);
  void AddConnections(int listener, int delta);
  void RecordTlsHandshake(int listener, HandshakeResult result);
  void RecordTlsHandshakeFailure(int listener, HandshakeFailure reason);
  void AddDelayed(int delta);
  // WebSocket tunnels open on `route` (+1 when one opens, -1 when it closes)
  // and the bytes they carried in `direction`.
  void AddWebSockets(int route, int delta);
  void AddWebSocketBytes(int route, TunnelDirection direction, std::uint64_t bytes);
  // HTTP/2 streams being served (+1 when one starts, -1 when it ends).
  void AddHttp2Streams(int delta);
  // A gRPC call on `route` ended with `grpc_status`; codes outside 0..16
  // count as UNKNOWN (2).
  void RecordGrpcResponse(int route, int grpc_status);
  // A request answered by the decision service.
  void RecordDecisionRequest(DecisionProtocol protocol);
  // A request limited for `key` (a store key, which begins with the rule's
  // name), for the status page's top limited keys. The tally is the one
  // exception to "nothing shared": a spin lock (TallyLock) taken by this
  // thread and by the once-per-second sampler. At most kMaxTrackedKeys keys per interval;
  // further keys only count as untracked.
  void RecordLimitedKey(std::string_view key);

  // Counts per key since the last take, and the untracked count.
  struct KeyTally {
    struct Hash {
      using is_transparent = void;
      std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    std::unordered_map<std::string, std::uint64_t, Hash, std::equal_to<>> counts;
    std::uint64_t untracked = 0;
  };
  static constexpr std::size_t kMaxTrackedKeys = 1024;

 private:
  friend class Metrics;
  static constexpr int kStatuses = 500;  // 100..599
  static void Bump(std::atomic<std::uint64_t>& c) {
    c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  std::unique_ptr<std::atomic<std::uint64_t>[]> requests_;           // [route][status - 100]
  std::unique_ptr<Histogram[]> request_duration_;                    // [route]
  std::unique_ptr<std::atomic<std::uint64_t>[]> decisions_;          // [rule][kind]
  std::unique_ptr<Histogram[]> upstream_duration_;                   // [upstream]
  std::unique_ptr<std::atomic<std::uint64_t>[]> upstream_failures_;  // [upstream][failure]
  Histogram redis_duration_;  // the local store's decisions take no loop time
  std::array<std::atomic<std::uint64_t>, 2 * kStoreErrorKinds> store_errors_{};
  std::array<std::atomic<std::uint64_t>, store::kFailurePolicies> fallbacks_{};
  std::unique_ptr<std::atomic<std::int64_t>[]> connections_;              // [listener]
  std::unique_ptr<std::atomic<std::uint64_t>[]> tls_handshakes_;          // [listener][result]
  std::unique_ptr<std::atomic<std::uint64_t>[]> tls_handshake_failures_;  // [listener][reason]
  std::atomic<std::int64_t> delayed_{0};
  std::unique_ptr<std::atomic<std::int64_t>[]> websockets_;        // [route]
  std::unique_ptr<std::atomic<std::uint64_t>[]> websocket_bytes_;  // [route][in, out]
  std::atomic<std::int64_t> http2_streams_{0};
  std::unique_ptr<std::atomic<std::uint64_t>[]> grpc_responses_;   // [route][grpc status]
  std::array<std::atomic<std::uint64_t>, 2> decision_requests_{};  // [protocol]
  // Taken per limited request by this thread and once per second by the
  // sampler, each time for a lookup or a swap: a spin lock, an exchange and
  // a store uncontended, cheaper per 429 than std::mutex's calls into
  // pthread (docs/performance.md).
  class TallyLock {
   public:
    void lock() noexcept {
      while (locked_.exchange(true, std::memory_order_acquire)) std::this_thread::yield();
    }
    void unlock() noexcept { locked_.store(false, std::memory_order_release); }

   private:
    std::atomic<bool> locked_{false};
  };
  TallyLock tally_mutex_;
  KeyTally tally_;
};

// Holds +1 in one of a worker's gauges while it lives (`add`: AddDelayed,
// AddHttp2Streams, ...); nothing when metrics are off.
class GaugeScope {
 public:
  GaugeScope(ThreadMetrics* metrics, void (ThreadMetrics::*add)(int))
      : metrics_(metrics), add_(add) {
    if (metrics_ != nullptr) (metrics_->*add_)(1);
  }
  ~GaugeScope() {
    if (metrics_ != nullptr) (metrics_->*add_)(-1);
  }
  GaugeScope(const GaugeScope&) = delete;
  GaugeScope& operator=(const GaugeScope&) = delete;

 private:
  ThreadMetrics* metrics_;
  void (ThreadMetrics::*add_)(int);
};

// Counts the calls a store decorator (store/failover_store.h) answered for
// its failed primary: the store error (tollgate_store_errors_total) and the
// on_error fallback taken (tollgate_store_fallback_total), into one
// worker's metrics, on its thread.
class StoreFailureCounter final : public store::FailureObserver {
 public:
  StoreFailureCounter(ThreadMetrics& metrics, StoreKindLabel store)
      : metrics_(metrics), store_(store) {}
  void OnStoreFailure(store::StoreStatus status, store::FailurePolicy policy) override;

 private:
  ThreadMetrics& metrics_;
  StoreKindLabel store_;
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
  // The live gateways on the Redis store (gateway/ops/membership.h); 0
  // with the local store: not rendered.
  std::int64_t cluster_gateways = 0;
};

// The process's metrics. Thread-safe.
class Metrics {
 public:
  Metrics(std::size_t threads, std::string version);

  // Stable ids for label values (configuration names), for the lifetime of
  // the process. Called while building a configuration, not per request.
  int RouteId(std::string_view name) { return Intern(routes_, name); }
  int RuleId(std::string_view name) { return Intern(rules_, name); }
  int UpstreamId(std::string_view name) { return Intern(upstreams_, name); }
  int ListenerId(std::string_view name) { return Intern(listeners_, name); }

  ThreadMetrics& thread(std::size_t index) { return *threads_[index]; }
  // A reload at this Unix time; `error` says why a failed one failed.
  void RecordReload(bool success, double unix_seconds, std::string_view error = {});
  // A configuration took effect (startup or reload) at this Unix time.
  void ConfigInForce(double unix_seconds);
  // A change made through the admin API (tollgate_admin_changes_total).
  void RecordAdminChange(AdminChange change);

  // Prometheus text exposition format 0.0.4.
  std::string Render(const ExternalGauges& external) const;

  // Cumulative counts for the status page, indexed by id.
  struct Counts {
    std::vector<std::string> rules, upstreams;  // names
    std::vector<std::array<std::uint64_t, kDecisionKinds>> decisions;
    std::vector<std::uint64_t> upstream_responses, upstream_failures;
  };
  Counts Snapshot() const;
  // Every thread's limited-key tally since the last call, merged.
  ThreadMetrics::KeyTally TakeLimitedKeys();
  struct ReloadStatus {
    std::uint64_t ok = 0, failed = 0;
    double last_success = 0;  // Unix seconds the configuration in force took effect
    double last_attempt = 0;  // Unix seconds of the last reload; 0: none yet
    bool last_ok = true;
    std::string last_error;
  };
  ReloadStatus Reloads() const;

 private:
  int Intern(std::vector<std::string>& names, std::string_view name);
  // `value(thread)` summed over the threads.
  template <typename F>
  auto Sum(F value) const {
    decltype(value(*threads_.front())) total{};
    for (const auto& t : threads_) total += value(*t);
    return total;
  }
  // The histogram `pick(thread)` merged over the threads.
  template <typename F>
  Histogram::Snapshot Merged(F pick) const {
    Histogram::Snapshot merged;
    for (const auto& t : threads_) merged.Add(pick(*t));
    return merged;
  }

  mutable std::mutex mutex_;  // names_, reload figures and admin changes
  std::vector<std::string> routes_, rules_, upstreams_, listeners_;
  std::vector<std::unique_ptr<ThreadMetrics>> threads_;
  std::string version_;
  ReloadStatus reloads_;
  std::array<std::uint64_t, kAdminChanges> admin_changes_{};
};

}  // namespace tollgate::gateway
