// What every thread's LeasingStore (store/leasing_store.h) counts, by rule:
// the tollgate_lease_* metrics and the status page's share of decisions
// made from leases. Thread-safe: relaxed atomic counters; a rule's record is
// found under a mutex once per rule and thread, then kept by pointer.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace tollgate::store {

class LeaseStats {
 public:
  // tollgate_lease_requests_total's `result`: a take that got units, one
  // that found the budget spent, one Redis did not answer.
  enum Result : int { kGranted, kRefused, kFailed };
  static constexpr int kResults = 3;
  static constexpr std::string_view kResultNames[kResults] = {"granted", "refused", "failed"};
  // tollgate_lease_units_total's `kind`.
  enum Units : int { kUnitsGranted, kUnitsUsed, kUnitsReturned };
  static constexpr int kUnitKinds = 3;
  static constexpr std::string_view kUnitNames[kUnitKinds] = {"granted", "used", "returned"};
  // Rules past this many share the record "_other".
  static constexpr std::size_t kMaxRules = 256;

  struct Rule {
    explicit Rule(std::string n) : name(std::move(n)) {}
    const std::string name;
    std::array<std::atomic<std::uint64_t>, kResults> requests{};
    std::array<std::atomic<std::uint64_t>, kUnitKinds> units{};
    std::atomic<std::int64_t> in_hand{0};      // units held now, every thread's
    std::atomic<std::uint64_t> decisions{0};   // decisions of the rule
    std::atomic<std::uint64_t> from_lease{0};  // of those, answered from units in hand
  };

  // The record of `rule`, made on first use; stable for the stats' life.
  Rule& For(std::string_view rule);

  // One rule's counts at one moment: the tollgate_lease_* metrics
  // (gateway/telemetry/metrics.cc renders them) and the status page's share.
  struct Counts {
    std::string rule;
    std::array<std::uint64_t, kResults> requests{};
    std::array<std::uint64_t, kUnitKinds> units{};
    std::int64_t in_hand = 0;
    std::uint64_t decisions = 0;
    std::uint64_t from_lease = 0;
  };
  std::vector<Counts> Snapshot() const;

 private:
  mutable std::mutex mutex_;
  std::deque<Rule> rules_;
};

}  // namespace tollgate::store
