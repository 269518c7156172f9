// The figures behind the admin status page (GET / and /status.json): once a
// second Sample() takes the metrics' cumulative counts and the limited-key
// tallies and keeps the last minute of them, so the page can chart per-rule
// rates, list the most limited keys and judge upstream health without
// anything new on the request path. Memory is bounded: kSeconds + 1 samples
// of at most kKeysPerSecond keys each. Used from the admin thread only: not
// thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "gateway/telemetry/metrics.h"
#include "rules/config.h"
#include "store/lease_stats.h"

namespace tollgate::gateway {

class StatusBoard {
 public:
  static constexpr std::size_t kSeconds = 60;              // the history charted
  static constexpr std::size_t kTopKeys = 10;              // limited keys listed
  static constexpr std::size_t kKeysPerSecond = 256;       // kept per sample; the rest: untracked
  static constexpr std::int64_t kHealthWindowMs = 10'000;  // recent, for upstream health

  // `metrics` must outlive the board.
  explicit StatusBoard(Metrics& metrics) : metrics_(metrics) {}

  // Takes a sample stamped `unix_ms`; called once a second.
  void Sample(std::int64_t unix_ms);

  // What the board does not sample itself.
  struct Context {
    const rules::Config* config = nullptr;  // in force: rule and upstream order, key display
    std::uint64_t generation = 0;           // 1 at startup, +1 per reload that took effect
    bool ready = false;
    std::string store_json = "{}";  // as in /readyz
    std::string version;
    std::int64_t unix_ms = 0;
    // The TLS listeners' certificates in force.
    struct Certificate {
      std::string listener, file, subject;
      std::int64_t not_after_unix = 0;  // when it expires
    };
    std::vector<Certificate> certificates;
    // Per rule with sync = "lease": its decisions since start and those
    // made from leases in hand (store/lease_stats.h).
    std::vector<store::LeaseStats::Counts> leases;
    // The upstreams with a concurrency limit, fixed or adaptive.
    std::vector<UpstreamConcurrency> concurrency;
  };
  // The /status.json document (see docs/metrics.md, "Status page").
  std::string RenderJson(const Context& context) const;

 private:
  struct Taken {
    std::int64_t unix_ms = 0;
    Metrics::Counts counts;
    std::vector<std::pair<std::string, std::uint64_t>> keys;  // this second's limited keys
    std::uint64_t untracked = 0;
  };
  Metrics& metrics_;
  std::deque<Taken> samples_;  // oldest first, at most kSeconds + 1
};

}  // namespace tollgate::gateway
