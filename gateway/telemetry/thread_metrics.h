// One worker thread's metrics. The worker writes only its own ThreadMetrics
// (relaxed atomic loads and stores, no read-modify-write, no lock, nothing
// shared between threads); a scrape (gateway/telemetry/metrics.h) reads every
// thread's counters and sums them. Ids of routes, rules, upstreams and
// listeners come from Metrics::RouteId() and its siblings, below kMaxNames.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "gateway/telemetry/handshake_result.h"
#include "gateway/telemetry/histogram.h"
#include "rules/rule.h"
#include "store/failover_store.h"

namespace tollgate::gateway {

enum class DecisionKind : std::uint8_t { kAllowed, kLimited, kDelayed, kDryRun, kExempt, kError };
inline constexpr int kDecisionKinds = 6;
// What happened to a settling rule's units (tollgate_ratelimit_cost_total):
// reserved at admission, settled to the response's cost, and the part of
// a reservation given back.
enum class CostPhase : std::uint8_t { kReserved, kSettled, kRefunded };
inline constexpr int kCostPhases = 3;
enum class UpstreamFailure : std::uint8_t { kConnect, kTimeout, kReset };
inline constexpr int kUpstreamFailures = 3;
enum class StoreKindLabel : std::uint8_t { kLocal, kRedis };
// A change made through the admin API (gateway/admin/admin_audit.h).
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

// What one worker has counted since the process started, indexed by the
// ids above. Written by the worker through ThreadMetrics; read by scrapes
// from any thread with relaxed loads.
struct ThreadCounters {
  static constexpr int kStatuses = 500;  // 100..599
  ThreadCounters();
  std::unique_ptr<std::atomic<std::uint64_t>[]> requests;           // [route][status - 100]
  std::unique_ptr<Histogram[]> request_duration;                    // [route]
  std::unique_ptr<std::atomic<std::uint64_t>[]> decisions;          // [rule][kind]
  std::unique_ptr<std::atomic<std::uint64_t>[]> costs;              // [rule][phase], units
  std::unique_ptr<Histogram[]> upstream_duration;                   // [upstream]
  std::unique_ptr<std::atomic<std::uint64_t>[]> upstream_failures;  // [upstream][failure]
  Histogram redis_duration;  // the local store's decisions take no loop time
  std::array<std::atomic<std::uint64_t>, 2 * kStoreErrorKinds> store_errors{};  // [store][kind]
  std::array<std::atomic<std::uint64_t>, store::kFailurePolicies> fallbacks{};
  std::unique_ptr<std::atomic<std::int64_t>[]> connections;              // [listener]
  std::unique_ptr<std::atomic<std::uint64_t>[]> tls_handshakes;          // [listener][result]
  std::unique_ptr<std::atomic<std::uint64_t>[]> tls_handshake_failures;  // [listener][reason]
  std::atomic<std::int64_t> delayed{0};
  std::unique_ptr<std::atomic<std::int64_t>[]> websockets;        // [route]
  std::unique_ptr<std::atomic<std::uint64_t>[]> websocket_bytes;  // [route][in, out]
  std::atomic<std::int64_t> http2_streams{0};
  std::unique_ptr<std::atomic<std::uint64_t>[]> grpc_responses;   // [route][grpc status]
  std::array<std::atomic<std::uint64_t>, 2> decision_requests{};  // [protocol]
};

// A WebSocket tunnel's direction: kIn client to upstream, kOut upstream to
// client (the `direction` label of tollgate_websocket_bytes_total).
enum class TunnelDirection { kIn, kOut };

// One worker's metrics. Record*() only from the owning thread.
class ThreadMetrics {
 public:
  void RecordRequest(int route, unsigned status, double seconds);
  void RecordDecision(int rule, DecisionKind kind);
  // `units` (>= 0) of a settling rule's cost in `phase`.
  void RecordCost(int rule, CostPhase phase, std::int64_t units);
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

  // What this worker counted, for scrapes (any thread).
  const ThreadCounters& counters() const { return counters_; }

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
  // The tally since the last take; from any thread.
  KeyTally TakeLimitedKeys();

 private:
  ThreadCounters counters_;
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

}  // namespace tollgate::gateway
