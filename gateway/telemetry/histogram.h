// A duration histogram for Prometheus with one writer thread and any number
// of readers: relaxed atomic loads and stores, no read-modify-write.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace tollgate::gateway {

// Seconds: 100 µs ... 10 s.
inline constexpr std::array<double, 16> kDurationBuckets = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
    0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};

class Histogram {
 public:
  // From the owning thread only.
  void Observe(double seconds);
  // Histograms merged at one moment (a scrape, the status sampler).
  struct Snapshot {
    std::array<std::uint64_t, kDurationBuckets.size() + 1> buckets{};  // not cumulative; last: +Inf
    double sum = 0;
    void Add(const Histogram& h);
    std::uint64_t count() const;
  };

 private:
  std::array<std::atomic<std::uint64_t>, kDurationBuckets.size() + 1> buckets_{};
  std::atomic<double> sum_{0};
};

}  // namespace tollgate::gateway
