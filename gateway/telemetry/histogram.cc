#include "gateway/telemetry/histogram.h"

#include <algorithm>

namespace tollgate::gateway {

void Histogram::Observe(double seconds) {
  // The first bucket without a search: the common case of a time under
  // its bound.
  const std::size_t i =
      seconds <= kDurationBuckets.front()
          ? 0
          : static_cast<std::size_t>(
                std::lower_bound(kDurationBuckets.begin(), kDurationBuckets.end(), seconds) -
                kDurationBuckets.begin());
  buckets_[i].store(buckets_[i].load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  sum_.store(sum_.load(std::memory_order_relaxed) + seconds, std::memory_order_relaxed);
}

void Histogram::Snapshot::Add(const Histogram& h) {
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    buckets[i] += h.buckets_[i].load(std::memory_order_relaxed);
  }
  sum += h.sum_.load(std::memory_order_relaxed);
}

std::uint64_t Histogram::Snapshot::count() const {
  std::uint64_t n = 0;
  for (std::uint64_t b : buckets) n += b;
  return n;
}

}  // namespace tollgate::gateway
