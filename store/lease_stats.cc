#include "store/lease_stats.h"

namespace tollgate::store {

LeaseStats::Rule& LeaseStats::For(std::string_view rule) {
  std::lock_guard lock(mutex_);
  for (Rule& r : rules_) {
    if (r.name == rule) return r;
  }
  if (rules_.size() + 1 >= kMaxRules) {
    for (Rule& r : rules_) {
      if (r.name == "_other") return r;
    }
    return rules_.emplace_back("_other");
  }
  return rules_.emplace_back(std::string(rule));
}

std::vector<LeaseStats::Counts> LeaseStats::Snapshot() const {
  std::lock_guard lock(mutex_);
  std::vector<Counts> out;
  for (const Rule& r : rules_) {
    Counts& c = out.emplace_back();
    c.rule = r.name;
    for (int i = 0; i < kResults; ++i)
      c.requests[i] = r.requests[i].load(std::memory_order_relaxed);
    for (int i = 0; i < kUnitKinds; ++i) c.units[i] = r.units[i].load(std::memory_order_relaxed);
    c.in_hand = r.in_hand.load(std::memory_order_relaxed);
    c.decisions = r.decisions.load(std::memory_order_relaxed);
    c.from_lease = r.from_lease.load(std::memory_order_relaxed);
  }
  return out;
}

}  // namespace tollgate::store
