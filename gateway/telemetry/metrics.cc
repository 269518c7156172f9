#include "gateway/telemetry/metrics.h"

#include <utility>

#include "gateway/telemetry/process_metrics.h"

namespace tollgate::gateway {

Metrics::Metrics(std::size_t threads, std::string version) : version_(std::move(version)) {
  for (std::size_t i = 0; i < threads; ++i) threads_.push_back(std::make_unique<ThreadMetrics>());
}

int Metrics::Intern(std::vector<std::string>& names, std::string_view name) {
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<int>(i);
  }
  if (names.size() + 1 >= static_cast<std::size_t>(kMaxNames)) {
    if (names.size() + 1 == static_cast<std::size_t>(kMaxNames)) names.emplace_back("_other");
    return kMaxNames - 1;
  }
  names.emplace_back(name);
  return static_cast<int>(names.size() - 1);
}

void Metrics::RecordReload(bool success, double unix_seconds, std::string_view error) {
  std::lock_guard lock(mutex_);
  ++(success ? reloads_.ok : reloads_.failed);
  reloads_.last_attempt = unix_seconds;
  reloads_.last_ok = success;
  reloads_.last_error = success ? std::string() : std::string(error);
}

void Metrics::RecordAdminChange(AdminChange change) {
  std::lock_guard lock(mutex_);
  ++admin_changes_[static_cast<std::size_t>(change)];
}

void Metrics::ConfigInForce(double unix_seconds) {
  std::lock_guard lock(mutex_);
  reloads_.last_success = unix_seconds;
}

Metrics::ReloadStatus Metrics::Reloads() const {
  std::lock_guard lock(mutex_);
  return reloads_;
}

Metrics::Counts Metrics::Snapshot() const {
  Counts c;
  {
    std::lock_guard lock(mutex_);
    c.rules = rules_;
    c.upstreams = upstreams_;
  }
  const auto load = [](const std::atomic<std::uint64_t>& a) {
    return a.load(std::memory_order_relaxed);
  };
  c.decisions.assign(c.rules.size(), {});
  c.upstream_responses.assign(c.upstreams.size(), 0);
  c.upstream_failures.assign(c.upstreams.size(), 0);
  for (const auto& thread : threads_) {
    const ThreadCounters& t = thread->counters();
    for (std::size_t r = 0; r < c.rules.size(); ++r) {
      for (int k = 0; k < kDecisionKinds; ++k) {
        c.decisions[r][k] += load(t.decisions[r * kDecisionKinds + k]);
      }
    }
    for (std::size_t u = 0; u < c.upstreams.size(); ++u) {
      Histogram::Snapshot responses;
      responses.Add(t.upstream_duration[u]);
      c.upstream_responses[u] += responses.count();
      for (int k = 0; k < kUpstreamFailures; ++k) {
        c.upstream_failures[u] += load(t.upstream_failures[u * kUpstreamFailures + k]);
      }
    }
  }
  return c;
}

ThreadMetrics::KeyTally Metrics::TakeLimitedKeys() {
  ThreadMetrics::KeyTally merged;
  for (const auto& t : threads_) {
    ThreadMetrics::KeyTally taken = t->TakeLimitedKeys();
    for (auto& [key, n] : taken.counts) merged.counts[key] += n;
    merged.untracked += taken.untracked;
  }
  return merged;
}

std::string Metrics::Render(const ExternalGauges& external) const {
  std::string out;
  out.reserve(64 * 1024);
  {
    std::lock_guard lock(mutex_);
    Scrape scrape{.threads = {},
                  .routes = routes_,
                  .rules = rules_,
                  .upstreams = upstreams_,
                  .listeners = listeners_,
                  .external = external,
                  .version = version_,
                  .reloads_ok = reloads_.ok,
                  .reloads_failed = reloads_.failed,
                  .last_reload_success = reloads_.last_success,
                  .admin_changes = admin_changes_};
    for (const auto& t : threads_) scrape.threads.push_back(&t->counters());
    WriteMetricFamilies(scrape, out);
  }
  if (const std::optional<ProcessStats> process = ReadProcessStats()) {
    AppendProcessMetrics(*process, out);
  }
  return out;
}

}  // namespace tollgate::gateway
