// [store] on_error, decided in one place: decorators in front of a store
// and a coordinator that can fail (Redis). When the primary cannot answer a
// call (timeout, unreachable, circuit open, error reply) the decorator
// counts the failure (FailureObserver) and completes the caller's sink with
// what its FailurePolicy says, marked with a ResultSource (store/store.h):
//   kLocal  the fallback (the process's LocalStore / LocalCoordinator)
//           answers: status kOk, source kFallback;
//   kShare  as kLocal, each limit divided by the live gateways
//           (store/fleet.h: ShareOf); a request costing more than its share
//           can hold is answered as kDeny answers; the coordinator's places
//           and learned limits are the fallback's as with kLocal;
//   kAllow  status stays the primary's failure, source kPolicyAllowed, an
//           allowing decision (remaining = the first window's limit), count 0;
//   kDeny   status stays the primary's failure, source kPolicyDenied, a
//           limiting decision (retry_after_ms 1000), count 0.
// Callers (the gateway) hold one Store and one Coordinator and read the
// answer's source, never the policy. With the local store alone there is
// no decorator: it cannot fail.
//
// Not thread-safe: one of each per I/O thread, like the Redis store and
// coordinator they own. No allocation per call once warm: each call in
// flight borrows a reusable record (its key copied into reused capacity).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "store/coordinator.h"
#include "store/fleet.h"
#include "store/local_store.h"
#include "store/store.h"

namespace tollgate::store {

// Told of every call a primary could not answer: the failure and the
// policy that answered for it (metrics: the store error, the fallback
// taken). Called on the decorator's thread, before the caller's sink.
class FailureObserver {
 public:
  virtual void OnStoreFailure(StoreStatus status, FailurePolicy policy) = 0;

 protected:
  ~FailureObserver() = default;
};

class FailoverStore final : public Store {
 public:
  // `fallback` and `observer` (may be null) must outlive the decorator.
  // `fallback_clock`: when set, the fallback decides at its NowMs() rather
  // than at the request's now_ms (a primary on another time scale, e.g.
  // Redis with time = "client" on wall-clock time). `fleet`: the live
  // gateways kShare divides by (required with kShare, else unused); must
  // outlive the decorator.
  FailoverStore(std::unique_ptr<Store> primary, LocalStore& fallback, FailurePolicy policy,
                FailureObserver* observer, const Clock* fallback_clock = nullptr,
                const FleetSize* fleet = nullptr);
  // Destroys the primary first: what it completes as it goes is still
  // answered by the policy.
  ~FailoverStore() override;
  FailoverStore(const FailoverStore&) = delete;
  FailoverStore& operator=(const FailoverStore&) = delete;

  void Decide(const DecideRequest& request, DecisionSink& sink) override;
  // Settles where the reservation was made (request.reserved_by): on the
  // primary, whose failure is passed on as it is, uncounted (never moved
  // to the fallback, which holds none of the units); on the fallback
  // (kShare: on the share it was reserved from), inline; or, for a
  // reservation the policy allowed without holding anything, nowhere
  // (kOk, an allowing decision as the policy's).
  void Settle(const SettleRequest& request, DecisionSink& sink) override;
  std::string_view Kind() const override { return primary_->Kind(); }
  // Answers `request` as the policy answers a call the primary failed with
  // `status` (counted likewise), without asking the primary: for a caller
  // that asked Redis itself (store/leasing_store.h). Inline.
  void DecideFailed(const DecideRequest& request, StoreStatus status, DecisionSink& sink);
  // The primary answered a call (this store's, or one its caller made
  // itself): an outage, if any, is over. kShare divides by the fleet's size
  // as it was when an outage began, until then.
  void PrimaryAnswered() { outage_gateways_ = 0; }

  Store& primary() { return *primary_; }
  FailurePolicy policy() const { return policy_; }

 private:
  struct Call;
  Call* Take();
  void Finish(Call* call, const StoreResult& result);
  // Whether the fallback decides `limit` at fallback_clock_'s time rather
  // than the request's: a calendar's requests are on Unix time anyway.
  bool OnFallbackClock(const LimitSpec& limit) const {
    return fallback_clock_ != nullptr && !limit.calendar;
  }
  // What the policy answers for `request` after a failure `status`.
  StoreResult PolicyAnswer(const DecideRequest& request, StoreStatus status);
  // kShare: `limit`'s share for one of the fleet's gateways now, made once
  // per limit and fleet size.
  const LimitSpec& Share(const LimitSpec& limit);

  LocalStore& fallback_;
  const FailurePolicy policy_;
  FailureObserver* const observer_;
  const Clock* const fallback_clock_;
  const FleetSize* const fleet_;
  // kShare: the shares made, by fingerprint and fleet size, with the
  // windows they divide (two limits of one fingerprint each get their own);
  // emptied past kMaxShares (a reload or a changing fleet leaves old ones
  // behind).
  struct MadeShare {
    std::vector<algorithms::LimitParams> of;
    LimitSpec share;
  };
  static constexpr std::size_t kMaxShares = 4096;
  std::int64_t outage_gateways_ = 0;  // kShare: the fleet's size in this outage; 0: none
  std::map<std::pair<std::uint32_t, std::int64_t>, MadeShare> shares_;
  std::vector<std::unique_ptr<Call>> calls_;  // every record made
  std::vector<Call*> free_;                   // those not in flight
  std::unique_ptr<Store> primary_;            // declared last: destroyed first
};

class FailoverCoordinator final : public Coordinator {
 public:
  // `fallback` and `observer` (may be null) must outlive the decorator.
  FailoverCoordinator(std::unique_ptr<Coordinator> primary, LocalCoordinator& fallback,
                      FailurePolicy policy, FailureObserver* observer);
  ~FailoverCoordinator() override;
  FailoverCoordinator(const FailoverCoordinator&) = delete;
  FailoverCoordinator& operator=(const FailoverCoordinator&) = delete;

  void CheckLearned(std::string_view upstream, std::string_view bucket, std::int64_t now_ms,
                    CountSink& sink) override;
  // Teaches the primary and, with FailurePolicy::kLocal, the fallback too:
  // it decides while the primary cannot.
  void Learn(std::string_view upstream, std::string_view bucket,
             const algorithms::LearnedFacts& facts, std::int64_t now_ms) override;
  void AcquirePlace(std::string_view key, std::int64_t max, std::int64_t now_ms,
                    InflightGuard& place, CountSink& sink) override;
  void EnterQueue(std::string_view key, std::int64_t ttl_ms, InflightGuard& ticket,
                  CountSink& sink) override;

  Coordinator& primary() { return *primary_; }

 private:
  struct Call;
  Call* Take();
  void Finish(Call* call, const CountResult& result);

  LocalCoordinator& fallback_;
  const FailurePolicy policy_;
  FailureObserver* const observer_;
  std::vector<std::unique_ptr<Call>> calls_;
  std::vector<Call*> free_;
  std::unique_ptr<Coordinator> primary_;  // declared last: destroyed first
};

}  // namespace tollgate::store
