// Settings and shared health counters of the Redis store, without any I/O
// (the config loader includes this). See store/redis_store.h.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tollgate::store {

enum class RedisTime : std::uint8_t {
  kServer,  // the scripts read Redis TIME: every gateway shares one clock
  kClient,  // DecideRequest::now_ms (replay's virtual clock, tests)
};

struct RedisAddress {
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  std::string user;  // empty: AUTH with the password only
  std::string password;
  std::int64_t db = 0;
};

// redis://[[user]:password@]host[:port][/db]. nullopt with `error` set.
std::optional<RedisAddress> ParseRedisUrl(std::string_view url, std::string& error);

struct RedisOptions {
  static constexpr std::size_t kMaxBatch = 64;

  RedisAddress address;
  // Redis Cluster seeds; empty: `address` alone. Credentials: the first's.
  std::vector<RedisAddress> nodes;
  std::string prefix = "tollgate:";
  std::int64_t timeout_ms = 20;  // per decision, from Decide() to completion
  std::size_t pool = 1;          // connections per I/O thread
  RedisTime time = RedisTime::kServer;
  std::int64_t min_ttl_ms = 0;            // floor of every key's TTL (replay: virtual time)
  std::int64_t inflight_ttl_ms = 60'000;  // an in-flight lease (max_inflight) expires after this
  std::size_t max_pending = 4096;         // commands awaiting a reply, per connection
  // Decisions of one limit that one script call may decide, at most (those
  // asked for in one turn of the event loop; 1: a call each). 1..kMaxBatch.
  std::size_t batch = kMaxBatch;
  int breaker_failures = 5;            // consecutive failures that open the circuit
  std::int64_t breaker_open_ms = 250;  // how long it stays open before a probe
  std::int64_t connect_timeout_ms = 500;
  std::int64_t max_backoff_ms = 400;  // reconnect delays double up to this
};

// Counts over every connection of every thread, for /readyz and metrics.
struct RedisHealth {
  std::atomic<std::int64_t> connections_up{0};
  std::atomic<std::int64_t> circuits_open{0};
  std::atomic<std::uint64_t> timeouts{0};
  std::atomic<std::uint64_t> errors{0};       // error replies (not NOSCRIPT)
  std::atomic<std::uint64_t> unavailable{0};  // decisions refused without sending
  std::atomic<std::uint64_t> noscript{0};     // NOSCRIPT answers (script reloaded)
  std::atomic<std::uint64_t> redirects{0};    // Redis Cluster MOVED/ASK/TRYAGAIN followed
  std::atomic<std::uint64_t> coalesced{0};    // decisions that joined an earlier one's script call
};

}  // namespace tollgate::store
