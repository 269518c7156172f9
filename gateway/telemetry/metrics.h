// Prometheus metrics. Each worker thread writes only its own ThreadMetrics
// (gateway/telemetry/thread_metrics.h); a scrape sums the threads' values and
// writes the families of gateway/telemetry/metric_families.h. Label values come
// from the configuration only (route, rule, upstream and listener names),
// interned once per name and bounded by kMaxNames.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/telemetry/metric_families.h"
#include "gateway/telemetry/thread_metrics.h"

namespace tollgate::gateway {

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

  // Prometheus text exposition format 0.0.4: the tollgate_* families and
  // the process_* ones.
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

  mutable std::mutex mutex_;  // names_, reload figures and admin changes
  std::vector<std::string> routes_, rules_, upstreams_, listeners_;
  std::vector<std::unique_ptr<ThreadMetrics>> threads_;
  std::string version_;
  ReloadStatus reloads_;
  std::array<std::uint64_t, kAdminChanges> admin_changes_{};
};

}  // namespace tollgate::gateway
