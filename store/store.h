// The one interface every rate-limit store implements (local memory, Redis,
// test fakes): decide a request against a key's state, asynchronously.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/limit.h"
#include "store/calendar.h"

namespace tollgate::store {

// The windows of one rule's limit, with what a store needs to keep their
// state: a fingerprint (state of a key is reset when its limit changes) and
// the bytes of state per key. Immutable once made; shared by reference.
struct LimitSpec {
  // The version of the stores' state formats, part of every fingerprint.
  // 2: a single token_bucket window's Redis state is two packed doubles
  // (store/lua/token_bucket_fused.lua), no longer the text "level last".
  static constexpr std::int64_t kStateFormat = 2;

  // sync = "lease" (docs/leases.md, store/leasing_store.h): the rule's
  // decisions come from leases of its keys' budgets. Not part of the
  // fingerprint: changing them keeps the keys' state.
  struct Lease {
    std::int64_t ttl_ms = 1000;  // lease_ttl: how long a gateway may spend a lease
    std::int64_t max_units = 1;  // lease_max: the most units one lease takes
    std::string rule;            // the rule's name (metrics)
  };

  std::vector<algorithms::LimitParams> windows;
  std::uint32_t fingerprint = 0;
  std::size_t state_bytes = 0;
  std::optional<Lease> lease;  // absent: sync = "exact", a store call per decision
  // calendar = "...": the one window, a fixed_window of
  // Calendar::SpanMs(unit) ms, counts in the calendar's periods. Its
  // requests' now_ms are Unix ms; every store decides at TimeOf(now_ms).
  std::shared_ptr<const Calendar> calendar;

  // The time the algorithms see for a request at `now_ms`.
  std::int64_t TimeOf(std::int64_t now_ms) const {
    return calendar ? calendar->AlgorithmTime(now_ms) : now_ms;
  }

  // Preconditions: algorithms::ValidateWindows(windows) passed; with a
  // calendar, windows is one fixed_window of its SpanMs.
  static LimitSpec Make(std::vector<algorithms::LimitParams> windows,
                        std::shared_ptr<const Calendar> calendar = nullptr);
};

struct DecideRequest {
  std::string_view key;     // opaque bytes, at most kMaxKeyBytes
  const LimitSpec* limit;   // must outlive the call until completion
  std::int64_t cost = 1;    // validated against the limit's capacity
  std::int64_t now_ms = 0;  // the caller's clock; a store may use its own
  // The LocalStore partition of the key's rule (LocalStore::AssignPartitions):
  // keys are evicted only by keys of their own partition. Other stores ignore it.
  std::uint32_t partition = 0;
  // KeyHash(key), for a caller that decides the same key many times (a
  // WebSocket tunnel's messages) and hashes it once; 0: the LocalStore
  // hashes the key itself (also right when the hash is 0). Other stores
  // ignore it. A decorator that passes the request on with another key
  // must not pass it on.
  std::uint64_t key_hash = 0;
};
inline constexpr std::size_t kMaxKeyBytes = 1024;

// The hash by which the LocalStore places a key (DecideRequest::key_hash).
inline std::uint64_t KeyHash(std::string_view key) { return std::hash<std::string_view>{}(key); }

enum class StoreStatus : std::uint8_t {
  kOk,           // `decision` is valid
  kTimeout,      // no answer within the store's deadline
  kUnavailable,  // the store cannot be reached (or its circuit is open)
  kError,        // the store answered with an error
};

// Who answered a call. A store answers for itself (kPrimary). A
// FailoverStore or FailoverCoordinator (store/failover_store.h) in front of
// a store that can fail (Redis) answers for it when it could not, as its
// FailurePolicy says, so that callers never need to know the policy:
//   kFallback       status kOk: the fallback store (the process's own)
//                   decided; a real decision or count ("rule:allowed(local)").
//   kPolicyAllowed  status is the primary's failure; the decision allows
//                   (`remaining` = the first window's limit), count 0: go
//                   on as if unlimited, holding nothing (on_error = "allow").
//   kPolicyDenied   status is the primary's failure; the decision limits
//                   (retry_after_ms 1000), count 0: the caller answers
//                   503 store_unavailable (on_error = "deny").
// A failed result with kPrimary (a store with no decorator in front, which
// the gateway never has: only Redis can fail) carries no decision or count;
// the gateway logs it "error" and lets the request through.
enum class ResultSource : std::uint8_t { kPrimary, kFallback, kPolicyAllowed, kPolicyDenied };

// What a FailoverStore/FailoverCoordinator does when its primary fails
// ([store] on_error; rules::StoreFailurePolicy is this type). kShare is
// kLocal with every limit divided by the number of live gateways
// (store/fleet.h).
enum class FailurePolicy : std::uint8_t { kAllow, kDeny, kLocal, kShare };
inline constexpr int kFailurePolicies = 4;

// A reservation to settle to its actual cost (docs/algorithms.md,
// "Settling a reservation"): the request that reserved, as it was decided
// (its key, limit, partition and key_hash; `cost` the units reserved,
// `now_ms` the time of the reservation), and what it really cost. Every
// window of the limit must settle (algorithms::CanSettle).
struct SettleRequest {
  DecideRequest reservation;
  std::int64_t actual = 0;  // >= 0
  std::int64_t now_ms = 0;  // the settle's time, the caller's clock; a store may use its own
  // Who answered the reservation (its StoreResult::source): a
  // FailoverStore settles where the units were reserved, and nowhere for
  // kPolicyAllowed (nothing was held).
  ResultSource reserved_by = ResultSource::kPrimary;
};

struct StoreResult {
  StoreStatus status = StoreStatus::kOk;
  ResultSource source = ResultSource::kPrimary;
  algorithms::Decision decision;
};

// Receives exactly one result per Decide() call. It may be called inline,
// on the same stack frame as Decide(), or later on the caller's I/O thread.
class DecisionSink {
 public:
  virtual void OnDecision(const StoreResult& result) = 0;

 protected:
  ~DecisionSink() = default;
};

// The integer answer of a call that is not a decision (the upstream
// protection of store/coordinator.h): `value` is valid when status is kOk.
struct CountResult {
  StoreStatus status = StoreStatus::kOk;
  std::int64_t value = 0;
  ResultSource source = ResultSource::kPrimary;  // as in StoreResult
};

// Receives exactly one result per call, inline or later on the caller's
// I/O thread, like DecisionSink.
class CountSink {
 public:
  virtual void OnCount(const CountResult& result) = 0;

 protected:
  ~CountSink() = default;
};

class Store {
 public:
  virtual ~Store() = default;
  // `sink` must stay valid until its OnDecision() has run.
  virtual void Decide(const DecideRequest& request, DecisionSink& sink) = 0;
  // Settles a reservation that Decide() allowed, in one step on the state
  // it was taken from (docs/algorithms.md, "Settling a reservation"):
  // `sink` gets, like a decision's, exactly one result, inline or later,
  // within the store's deadline; with status kOk its decision shows the
  // key's state after the settle (algorithms::Settle). A settle that fails
  // leaves the reservation as it was. Preconditions: every window of
  // request.reservation.limit can settle (algorithms::CanSettle).
  virtual void Settle(const SettleRequest& request, DecisionSink& sink) = 0;
  // "local", "redis", ...: for metrics and logs.
  virtual std::string_view Kind() const = 0;
  // The gateway begins to drain: give back what this store holds of a
  // budget other gateways share (leases). Most stores hold nothing.
  virtual void Drain() {}
};

}  // namespace tollgate::store
