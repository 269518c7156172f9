// The admin API: JSON calls under /api/v1/ on the admin listener
// (docs/admin-api.md). Every call is authorized first (gateway/admin/admin_auth.h);
// errors are JSON objects {"error","message","status"} with a "field" when
// one part of the call is wrong and the list of "rules" when the rule named
// is unknown. Answers from the configuration in force and the configured
// store (local or Redis: the same answer). Every change is audited: a log
// line and tollgate_admin_changes_total. Runs on the admin
// listener's thread; not thread-safe.
#pragma once

#include <boost/json/array.hpp>
#include <boost/json/value.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/io/net.h"
#include "gateway/admin/admin_auth.h"
#include "gateway/admin/admin_keys.h"
#include "gateway/telemetry/metrics.h"

namespace tollgate::store {
class Clock;
class LocalStore;
class RedisStore;
}  // namespace tollgate::store

namespace tollgate::gateway {

class AdminBlocks;
class AdminOverrides;
class StateSource;
struct GatewayState;

class AdminApi {
 public:
  // `states` and the stores must outlive the API. `redis`: with [store] kind
  // = "redis", a RedisStore of the admin listener's own (on its thread),
  // else null; `local` is the process's local store (with Redis: the
  // fallback of on_error = "local").
  AdminApi(const StateSource& states, ListenerScope scope, store::LocalStore& local,
           store::RedisStore* redis, AdminBlocks& blocks, AdminOverrides& overrides,
           const store::Clock& clock, Metrics* metrics);

  // Answers one call whose target starts with kPrefix.
  static constexpr std::string_view kPrefix = "/api/";
  // `peer`: the caller's address, for the audit log.
  Task<http::response<http::string_body>> Handle(const http::request<http::string_body>& req,
                                                 std::string_view peer);

 private:
  // Who makes a change: "token <fingerprint>" (or "no token") and the peer.
  struct Caller {
    std::string who;
    std::string peer;
  };
  // GET and DELETE /api/v1/keys.
  Task<http::response<http::string_body>> Keys(const http::request<http::string_body>& req,
                                               const Caller& caller);
  // The windows of `key` (a store key) decided by `rule` (the configured
  // rule, or an override's form of it) as GET shows them; nullopt when the
  // store did not answer.
  Task<std::optional<boost::json::array>> ReadWindows(const GatewayState& state,
                                                      const rules::RuleConfig& rule,
                                                      std::string key, std::uint32_t partition);
  // Resets `key`'s state under `limit`: false when the store did not answer.
  Task<bool> ResetKey(std::string key, const store::LimitSpec& limit, std::uint32_t partition);
  // GET, PUT and DELETE /api/v1/blocks.
  Task<http::response<http::string_body>> Blocks(const http::request<http::string_body>& req,
                                                 const Caller& caller);
  // GET, PUT and DELETE /api/v1/overrides.
  Task<http::response<http::string_body>> Overrides(const http::request<http::string_body>& req,
                                                    const Caller& caller);
  // The block with this id as GET lists it, or null.
  boost::json::value Listed(std::string_view id, std::int64_t now_unix_ms) const;
  // The audit of a change: one line in the operational log (who, from
  // where, what, before and after) and tollgate_admin_changes_total.
  void RecordChange(AdminChange change, const Caller& caller, std::string_view what,
                    const boost::json::value& before, const boost::json::value& after);

  const StateSource& states_;
  const ListenerScope scope_;
  store::LocalStore& local_;
  store::RedisStore* redis_;
  AdminBlocks& blocks_;
  AdminOverrides& overrides_;
  const store::Clock& clock_;
  Metrics* metrics_;  // null when metrics are off
};

}  // namespace tollgate::gateway
