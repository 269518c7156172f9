// The overrides of the admin API (PUT, GET and DELETE /api/v1/overrides):
// read from JSON, kept in the configured store and compiled against the
// configuration in force into the OverrideTable that admit reads
// (gateway/core/overrides.h). With the local store they live in this
// process; with Redis in a hash shared by every gateway on it (the blocks'
// scripts, store/lua/admin/blocks_*.lua, on a hash of its own), which each
// gateway reads again whenever its version moves, checked every
// kRefreshInterval: an override set on one gateway applies on all of them
// within a second. They are compiled again when the configuration changes,
// so they survive reloads; one whose rule or key parts the configuration no
// longer has is kept until its ttl but applies to nothing. Admin thread
// only.
#pragma once

#include <boost/json/object.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gateway/core/overrides.h"
#include "gateway/io/net.h"
#include "gateway/admin/admin_hash.h"
#include "rules/config.h"
#include "base/clock.h"

namespace tollgate::gateway {

class StateSource;

class AdminOverrides {
 public:
  static constexpr std::chrono::milliseconds kRefreshInterval{500};

  struct Limit {
    std::int64_t limit = 0;
    std::string window;  // a duration as given, e.g. "1m"
    std::optional<std::int64_t> burst;
  };
  struct Override {
    std::string rule;
    // The key's parts, as the admin API names them ("user", "ip",
    // "header:x-api-key": header names in lower case), in name order.
    std::vector<std::pair<std::string, std::string>> key;
    std::vector<Limit> limits;
    std::int64_t expires_unix_ms = 0;  // wall clock, ms
    // Names the override whatever the configuration: its rule and parts.
    std::string Id() const;
  };
  // Why a body or query names no override: 400 with the field, or 404 for
  // an unknown rule (`rules` lists the configuration's).
  struct Problem {
    unsigned status = 400;
    std::string field;
    std::string message;
  };

  // `table`, `states`, `clock` and `redis` (null with the local store)
  // must outlive it.
  AdminOverrides(OverrideTable& table, const StateSource& states, const store::Clock& clock,
                 store::RedisStore* redis);

  // The overrides of a PUT body: one object
  // {"rule","key":{part:value},"limits":[{"limit","window"[,"burst"]}],"ttl"},
  // or an array of them (all or none), each checked against `config`.
  // nullopt with `problem` saying what is wrong (fields of an array's
  // items start with "[i].").
  static std::optional<std::vector<Override>> Parse(std::string_view body,
                                                    const rules::Config& config,
                                                    std::int64_t now_unix_ms, Problem& problem);
  // The id of the override of rule `rule` and key parts `params` as a
  // query names them (DELETE ?rule=NAME&user=alice).
  static std::string IdOf(std::string_view rule,
                          std::vector<std::pair<std::string, std::string>> params);
  // An override as the API lists it: rule, key, limits, expires_unix_ms,
  // ttl_ms (what is left at now_unix_ms) and whether it applies to the
  // configuration in force.
  boost::json::object Describe(const Override& o, std::int64_t now_unix_ms) const;
  // An applied override as a key's GET shows it: limits, expires_unix_ms,
  // ttl_ms.
  static boost::json::object DescribeApplied(const AppliedOverride& o, std::int64_t now_unix_ms);

  // Adds `overrides` (replacing those with their ids). False when the store
  // did not answer: nothing changed.
  Task<bool> Put(std::vector<Override> overrides);
  // Removes the override with this id: whether there was one; nullopt when
  // the store did not answer.
  Task<std::optional<bool>> Remove(std::string id);
  // The overrides not over yet, in id order.
  std::vector<Override> Current() const;
  const Override* Find(std::string_view id) const;
  // The override of `rule`'s `key` that applies now, if any: a copy, which
  // keeps its rule alive.
  std::optional<AppliedOverride> Applied(const rules::RuleConfig& rule, std::string_view key) const;

  // Refreshes every kRefreshInterval (Redis: the shared hash; both: a
  // configuration that changed, overrides over) until Stop().
  void Start(asio::io_context& io);
  void Stop();

 private:
  // Redis: reads the overrides again if their version moved (or some are
  // over: those are dropped from the hash).
  Task<bool> Refresh();
  Task<void> RefreshLoop();
  // Compiles the overrides kept against the configuration in force into
  // the table.
  void Apply();

  OverrideTable& table_;
  const StateSource& states_;
  const store::Clock& clock_;
  std::optional<AdminHash> shared_;  // Redis
  std::map<std::string, Override> kept_;  // by id, as last applied
  std::set<std::string> dormant_;         // ids that apply to nothing
  std::uint64_t generation_ = 0;          // of the configuration applied
  std::optional<Timer> timer_;
  bool stopped_ = false;
};

}  // namespace tollgate::gateway
