// The fleet's membership on Redis: once every kHeartbeat this gateway renews
// its entry in a sorted set shared by every gateway on the same Redis and
// prefix (store/lua/admin/members.lua, on Redis's clock), and learns how many
// entries are live. The count goes into the FleetSize that on_error =
// "share" divides limits by, the gauge tollgate_cluster_gateways and
// /readyz; Redis's time in the reply into the RedisClockOffset on which
// the local fallback keeps Redis's windows. A gateway that stops leaves the
// set; one that dies drops out after kLasts. While Redis does not answer,
// the last count stays. Admin thread only (Start, Stop); FleetSize and
// RedisClockOffset are thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "gateway/io/net.h"
#include "store/fleet.h"

namespace tollgate::store {
class RedisStore;
}  // namespace tollgate::store

namespace tollgate::gateway {

class Membership {
 public:
  static constexpr std::chrono::milliseconds kHeartbeat{1000};
  // A membership not renewed for this long is over: three heartbeats.
  static constexpr std::chrono::milliseconds kLasts{3000};

  // Every argument must outlive it; `clock` is the gateway's.
  Membership(store::RedisStore& redis, store::FleetSize& fleet, store::RedisClockOffset& offset,
             const store::Clock& clock);

  // Beats every kHeartbeat on `io` until Stop().
  void Start(asio::io_context& io);
  // Stops beating and leaves the set (one call, not awaited).
  void Stop();

  // This gateway's entry: host name, process id and a random part.
  const std::string& id() const { return id_; }

 private:
  Task<void> Beat();

  store::RedisStore& redis_;
  store::FleetSize& fleet_;
  store::RedisClockOffset& offset_;
  const store::Clock& clock_;
  std::string key_;
  std::string id_;
  std::optional<Timer> timer_;
  bool stopped_ = false;
};

}  // namespace tollgate::gateway
