#include "gateway/telemetry/thread_metrics.h"

#include <mutex>
#include <utility>

#include "gateway/telemetry/metric_families.h"

namespace tollgate::gateway {
namespace {

template <typename T>
std::unique_ptr<T[]> Zeroed(std::size_t n) {
  return std::unique_ptr<T[]>(new T[n]());
}

template <typename T>
void Add(std::atomic<T>& c, T delta) {
  c.store(c.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
}

void Bump(std::atomic<std::uint64_t>& c) { Add<std::uint64_t>(c, 1); }

}  // namespace

ThreadCounters::ThreadCounters()
    : requests(Zeroed<std::atomic<std::uint64_t>>(kMaxNames * kStatuses)),
      request_duration(new Histogram[kMaxNames]),
      decisions(Zeroed<std::atomic<std::uint64_t>>(kMaxNames * kDecisionKinds)),
      costs(Zeroed<std::atomic<std::uint64_t>>(kMaxNames * kCostPhases)),
      upstream_duration(new Histogram[kMaxNames]),
      upstream_failures(Zeroed<std::atomic<std::uint64_t>>(kMaxNames * kUpstreamFailures)),
      connections(Zeroed<std::atomic<std::int64_t>>(kMaxNames)),
      tls_handshakes(Zeroed<std::atomic<std::uint64_t>>(kMaxNames * kHandshakeResults)),
      tls_handshake_failures(Zeroed<std::atomic<std::uint64_t>>(kMaxNames * kHandshakeFailures)),
      websockets(Zeroed<std::atomic<std::int64_t>>(kMaxNames)),
      websocket_bytes(Zeroed<std::atomic<std::uint64_t>>(kMaxNames * 2)),
      grpc_responses(Zeroed<std::atomic<std::uint64_t>>(kMaxNames * kGrpcStatuses)) {}

void ThreadMetrics::RecordRequest(int route, unsigned status, double seconds) {
  if (status >= 100 && status < 600) {
    Bump(counters_.requests[route * ThreadCounters::kStatuses + (status - 100)]);
  }
  counters_.request_duration[route].Observe(seconds);
}

void ThreadMetrics::RecordDecision(int rule, DecisionKind kind) {
  Bump(counters_.decisions[rule * kDecisionKinds + static_cast<int>(kind)]);
}

void ThreadMetrics::RecordCost(int rule, CostPhase phase, std::int64_t units) {
  if (units > 0) {
    Add<std::uint64_t>(counters_.costs[rule * kCostPhases + static_cast<int>(phase)],
                       static_cast<std::uint64_t>(units));
  }
}

void ThreadMetrics::RecordUpstream(int upstream, double seconds) {
  counters_.upstream_duration[upstream].Observe(seconds);
}

void ThreadMetrics::RecordUpstreamFailure(int upstream, UpstreamFailure failure) {
  Bump(counters_.upstream_failures[upstream * kUpstreamFailures + static_cast<int>(failure)]);
}

void ThreadMetrics::RecordStore(StoreKindLabel store, double seconds) {
  // The local store decides within the event loop's turn: no loop time
  // passes, so there is nothing to observe.
  if (store == StoreKindLabel::kRedis) counters_.redis_duration.Observe(seconds);
}

void ThreadMetrics::RecordStoreError(StoreKindLabel store, StoreErrorKind kind) {
  Bump(counters_.store_errors[static_cast<int>(store) * kStoreErrorKinds + static_cast<int>(kind)]);
}

void ThreadMetrics::RecordFallback(rules::StoreFailurePolicy policy) {
  Bump(counters_.fallbacks[static_cast<int>(policy)]);
}

void StoreFailureCounter::OnStoreFailure(store::StoreStatus status, store::FailurePolicy policy) {
  metrics_.RecordStoreError(
      store_, status == store::StoreStatus::kTimeout       ? StoreErrorKind::kTimeout
              : status == store::StoreStatus::kUnavailable ? StoreErrorKind::kUnavailable
                                                           : StoreErrorKind::kError);
  metrics_.RecordFallback(policy);
}

void ThreadMetrics::AddConnections(int listener, int delta) {
  Add<std::int64_t>(counters_.connections[listener], delta);
}

void ThreadMetrics::RecordTlsHandshake(int listener, HandshakeResult result) {
  Bump(counters_.tls_handshakes[listener * kHandshakeResults + static_cast<int>(result)]);
}

void ThreadMetrics::RecordTlsHandshakeFailure(int listener, HandshakeFailure reason) {
  Bump(counters_.tls_handshake_failures[listener * kHandshakeFailures + static_cast<int>(reason)]);
}

void ThreadMetrics::AddDelayed(int delta) { Add<std::int64_t>(counters_.delayed, delta); }

void ThreadMetrics::AddWebSockets(int route, int delta) {
  Add<std::int64_t>(counters_.websockets[route], delta);
}

void ThreadMetrics::AddWebSocketBytes(int route, TunnelDirection direction,
                                      std::uint64_t bytes) {
  Add(counters_.websocket_bytes[route * 2 + (direction == TunnelDirection::kIn ? 0 : 1)],
      bytes);
}

void ThreadMetrics::AddHttp2Streams(int delta) {
  Add<std::int64_t>(counters_.http2_streams, delta);
}

void ThreadMetrics::RecordDecisionRequest(DecisionProtocol protocol) {
  Bump(counters_.decision_requests[static_cast<int>(protocol)]);
}

void ThreadMetrics::RecordGrpcResponse(int route, int grpc_status) {
  constexpr int kUnknown = 2;
  if (grpc_status < 0 || grpc_status >= kGrpcStatuses) grpc_status = kUnknown;
  Bump(counters_.grpc_responses[route * kGrpcStatuses + grpc_status]);
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

ThreadMetrics::KeyTally ThreadMetrics::TakeLimitedKeys() {
  KeyTally taken;
  std::lock_guard lock(tally_mutex_);
  std::swap(taken, tally_);
  return taken;
}

std::string_view HandshakeFailureName(HandshakeFailure reason) {
  return kHandshakeFailureNames[static_cast<int>(reason)];
}

std::string_view AdminChangeName(AdminChange change) {
  return kAdminChangeNames[static_cast<int>(change)];
}

}  // namespace tollgate::gateway
