#include "store/lease_stats.h"

#include <fmt/format.h>

namespace tollgate::store {
namespace {

// A rule name as a Prometheus label value.
std::string Label(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

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

std::string LeaseStats::Render() const {
  static constexpr std::string_view kResultNames[kResults] = {"granted", "refused", "failed"};
  static constexpr std::string_view kUnitNames[kUnitKinds] = {"granted", "used", "returned"};
  std::lock_guard lock(mutex_);
  if (rules_.empty()) return {};
  std::string out =
      "# HELP tollgate_lease_requests_total Lease takes sent to Redis (sync = \"lease\"), by "
      "rule and result.\n# TYPE tollgate_lease_requests_total counter\n";
  for (const Rule& r : rules_) {
    for (int i = 0; i < kResults; ++i) {
      fmt::format_to(std::back_inserter(out),
                     "tollgate_lease_requests_total{{rule=\"{}\",result=\"{}\"}} {}\n", Label(r.name),
                     kResultNames[i], r.requests[i].load(std::memory_order_relaxed));
    }
  }
  out +=
      "# HELP tollgate_lease_units_total Units of leases granted by Redis, used for admitted "
      "requests, and returned unused.\n# TYPE tollgate_lease_units_total counter\n";
  for (const Rule& r : rules_) {
    for (int i = 0; i < kUnitKinds; ++i) {
      fmt::format_to(std::back_inserter(out),
                     "tollgate_lease_units_total{{rule=\"{}\",kind=\"{}\"}} {}\n", Label(r.name),
                     kUnitNames[i], r.units[i].load(std::memory_order_relaxed));
    }
  }
  out +=
      "# HELP tollgate_lease_units_in_hand Units of leases this gateway holds now, unused.\n"
      "# TYPE tollgate_lease_units_in_hand gauge\n";
  for (const Rule& r : rules_) {
    fmt::format_to(std::back_inserter(out), "tollgate_lease_units_in_hand{{rule=\"{}\"}} {}\n",
                   Label(r.name), r.in_hand.load(std::memory_order_relaxed));
  }
  return out;
}

std::vector<LeaseStats::Share> LeaseStats::Shares() const {
  std::lock_guard lock(mutex_);
  std::vector<Share> out;
  for (const Rule& r : rules_) {
    out.push_back({r.name, r.decisions.load(std::memory_order_relaxed),
                   r.from_lease.load(std::memory_order_relaxed)});
  }
  return out;
}

}  // namespace tollgate::store
