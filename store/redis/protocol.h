// Internal to the Redis store (store/redis_*.cc, store/redis/*.cc): the
// Redis protocol as the store speaks it. RESP command writing, the decision
// scripts' commands (script choice and SHA-1, EVALSHA arguments) and
// replies, and the commands that set a connection up. protocol.cc also
// defines the keys (RedisKey, RedisTaggedKey) and the script functions that
// store/redis_store.h declares. No I/O.
#pragma once

#include <hiredis/hiredis.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/redis_options.h"
#include "store/redis_scripts.h"
#include "store/redis_store.h"
#include "store/store.h"

namespace tollgate::store::redis {

// The SHA-1 of script `script` (an index in kRedisScripts) as EVALSHA takes it.
const std::string& ScriptSha(int script);

// The decision script of `limit`: its algorithm's for a single window, else
// "multi".
inline int ScriptIndex(const LimitSpec& limit) {
  return limit.windows.size() == 1 ? static_cast<int>(limit.windows[0].algorithm)
                                   : kMultiWindowScript;
}

// RESP: "*<n>\r\n" then "$<len>\r\n<bytes>\r\n" per argument. On every
// decision's path: plain appends, no format strings.
class RespWriter {
 public:
  explicit RespWriter(std::string& out) : out_(out) {}
  void Count(std::size_t n) { Header('*', n); }
  void Arg(std::string_view s);
  void Arg(std::int64_t v);

 private:
  void Header(char kind, std::size_t n);
  std::string& out_;
};

// The `n` decisions of one script call, in the order of its costs: a
// string of ','-separated fused decisions, or decide.lua's array of 7
// integers per decision.
bool ReadDecisions(const redisReply& reply, std::size_t n, algorithms::Decision* out);
// One decision of decide.lua's (or settle.lua's) 7 integers.
inline constexpr std::size_t kDecisionValues = 7;
algorithms::Decision DecisionOfValues(const std::int64_t* v);
// The first of the lease takes left in `text` (lease_take.lua's reply: one
// string, the takes separated by ',', each its integers separated by ' ')
// appended to `values`, removed from `text` with its ','; false if it is
// not one.
bool ReadLeaseTake(std::string_view& text, std::vector<std::int64_t>& values);

inline std::string_view ErrorText(const redisReply& reply) {
  return std::string_view(reply.str, reply.len);
}

// Redis Cluster's redirections (RedisStore::Redirect follows them).
inline bool IsRedirect(std::string_view error) {
  return error.starts_with("MOVED ") || error.starts_with("ASK ") || error.starts_with("TRYAGAIN");
}

using Command = std::vector<std::string>;

// The commands that set a connection up (AUTH, SELECT), sent before anything
// else on it, by CheckRedis() and by every asynchronous connection.
std::vector<Command> HandshakeCommands(const RedisAddress& address);
// SCRIPT LOAD of script `script` (an index in kRedisScripts).
Command ScriptLoad(int script);
// `command` as RESP.
std::string Resp(const Command& command);

// A single token_bucket window is decided by store/lua/token_bucket_fused.lua,
// which takes one or more keys, five arguments and then each key's costs;
// every other limit by decide.lua, one key (two per window) and its costs.
inline bool FusedTokenBucket(const LimitSpec& limit) {
  return limit.windows.size() == 1 &&
         limit.windows[0].algorithm == algorithms::Algorithm::kTokenBucket;
}

// The number of arguments WriteDecideParams() writes for `limit`.
inline std::size_t DecideParamCount(const LimitSpec& limit) {
  return 3 + 6 * limit.windows.size();
}

// The number of RESP arguments WriteEvalshaHead() writes for `limit`
// (decide.lua).
inline std::size_t HeadArgCount(const LimitSpec& limit) {
  const std::size_t windows = limit.windows.size();
  // EVALSHA sha numkeys, two keys per window, now, min_ttl, window count,
  // six parameters per window.
  return 3 + 2 * windows + DecideParamCount(limit);
}

// The first two arguments of every decision script: now_ms ("": server
// time) and min_ttl_ms.
template <typename Writer>
void WriteTimeArgs(std::optional<std::int64_t> now_ms, std::int64_t min_ttl_ms, Writer& out) {
  if (now_ms) {
    out.Arg(*now_ms);
  } else {
    out.Arg(std::string_view());
  }
  out.Arg(min_ttl_ms);
}

// The arguments of token_bucket_fused.lua after its keys and before the
// costs: now_ms (nullopt: server time), min_ttl_ms, limit, window, burst.
inline constexpr std::size_t kFusedTailArgs = 5;
template <typename Writer>
void WriteFusedTail(const LimitSpec& limit, std::optional<std::int64_t> now_ms,
                    std::int64_t min_ttl_ms, Writer& out) {
  WriteTimeArgs(now_ms, min_ttl_ms, out);
  const algorithms::LimitParams& p = limit.windows[0];
  out.Arg(p.limit);
  out.Arg(p.window_ms);
  out.Arg(p.burst);
}

// "EVALSHA sha numkeys keys... args..." of decide.lua into `out` (which has
// Arg(std::string_view) and Arg(std::int64_t)), up to the costs, which come
// last: one argument per decision. nullopt now_ms: server time. Returns the
// first key (its Cluster slot is the decisions').
// The keys of `key` under `limit` as decide.lua takes them (two per
// window: its state and its second key) into `out`. Returns the first key
// (its Cluster slot is the decisions').
template <typename Writer>
std::string WriteDecideKeys(const LimitSpec& limit, std::string_view prefix, std::string_view key,
                            Writer& out) {
  std::string first_key;
  for (std::size_t i = 0; i < limit.windows.size(); ++i) {
    std::string state_key = RedisKey(prefix, key, limit.fingerprint, i);
    out.Arg(state_key);
    // The second key of a window (sliding_log's counter).
    const std::size_t size = state_key.size();
    state_key += ":n";
    out.Arg(state_key);
    state_key.resize(size);
    if (i == 0) first_key = std::move(state_key);
  }
  return first_key;
}

// decide.lua's arguments after its keys and before the costs: now_ms
// (nullopt: server time), min_ttl_ms, the window count, six parameters per
// window.
template <typename Writer>
void WriteDecideParams(const LimitSpec& limit, std::optional<std::int64_t> now_ms,
                       std::int64_t min_ttl_ms, Writer& out) {
  WriteTimeArgs(now_ms, min_ttl_ms, out);
  out.Arg(static_cast<std::int64_t>(limit.windows.size()));
  for (const algorithms::LimitParams& p : limit.windows) {
    out.Arg(algorithms::AlgorithmName(p.algorithm));
    out.Arg(p.limit);
    out.Arg(p.window_ms);
    out.Arg(p.burst);
    out.Arg(p.sub_windows);
    out.Arg(std::int64_t{p.shaping == algorithms::Shaping::kNoDelay ? 1 : 0});
  }
}

// The arguments after EVALSHA's sha (numkeys onward; the admin API's
// key_peek.lua and key_reset.lua take the same): see WriteEvalshaHead.
template <typename Writer>
std::string WriteDecideArgs(const LimitSpec& limit, std::string_view prefix, std::string_view key,
                            std::optional<std::int64_t> now_ms, std::int64_t min_ttl_ms,
                            Writer& out) {
  out.Arg(static_cast<std::int64_t>(2 * limit.windows.size()));
  std::string first_key = WriteDecideKeys(limit, prefix, key, out);
  WriteDecideParams(limit, now_ms, min_ttl_ms, out);
  return first_key;
}

template <typename Writer>
std::string WriteEvalshaHead(const LimitSpec& limit, std::string_view prefix, std::string_view key,
                             std::optional<std::int64_t> now_ms, std::int64_t min_ttl_ms,
                             Writer& out) {
  out.Arg("EVALSHA");
  out.Arg(ScriptSha(ScriptIndex(limit)));
  return WriteDecideArgs(limit, prefix, key, now_ms, min_ttl_ms, out);
}

}  // namespace tollgate::store::redis
