// Writes metric families in Prometheus's text exposition format 0.0.4
// (gateway/telemetry/metric_families.cc, gateway/telemetry/process_metrics.cc). Not thread-safe:
// one writer per scrape.
#pragma once

#include <fmt/format.h>

#include <iterator>
#include <string>
#include <string_view>

#include "gateway/telemetry/histogram.h"

namespace tollgate::gateway {

class MetricsWriter {
 public:
  // Names are written after `prefix` ("tollgate_", or "" for process_*).
  MetricsWriter(std::string& out, std::string_view prefix) : out_(out), prefix_(prefix) {}
  void Family(std::string_view name, std::string_view type, std::string_view help) {
    fmt::format_to(std::back_inserter(out_), "# HELP {}{} {}\n# TYPE {}{} {}\n", prefix_, name,
                   help, prefix_, name, type);
  }
  // labels: `a="x",b="y"` (already escaped) or empty.
  template <typename V>
  void Sample(std::string_view name, std::string_view labels, V value) {
    if (labels.empty()) {
      fmt::format_to(std::back_inserter(out_), "{}{} {}\n", prefix_, name, value);
    } else {
      fmt::format_to(std::back_inserter(out_), "{}{}{{{}}} {}\n", prefix_, name, labels, value);
    }
  }
  void Histogram(std::string_view name, std::string_view labels, const Histogram::Snapshot& h) {
    const std::string prefix = labels.empty() ? std::string() : std::string(labels) + ",";
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < kDurationBuckets.size(); ++i) {
      cumulative += h.buckets[i];
      Sample(fmt::format("{}_bucket", name),
             fmt::format("{}le=\"{}\"", prefix, kDurationBuckets[i]), cumulative);
    }
    cumulative += h.buckets.back();
    Sample(fmt::format("{}_bucket", name), prefix + "le=\"+Inf\"", cumulative);
    Sample(fmt::format("{}_sum", name), labels, h.sum);
    Sample(fmt::format("{}_count", name), labels, cumulative);
  }

 private:
  std::string& out_;
  std::string_view prefix_;
};

}  // namespace tollgate::gateway
