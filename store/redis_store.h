// RedisStore: rate-limit state in Redis, shared by every gateway that uses
// the same Redis. Decisions run as Lua scripts (store/lua/, one per
// algorithm and one for multi-window limits) that follow
// docs/algorithms.md exactly as the local store does.
//
// One RedisStore per I/O thread: it owns `pool` hiredis asynchronous
// connections (per master, on Redis Cluster: commands go to the master of
// their keys' slot; MOVED updates the slot map, ASK is followed once with
// ASKING; TRYAGAIN, and a MOVED after the first for one command, are
// retried after kRetryAfterMs; all of them within the command's deadline)
// driven by that thread's io_context, pipelines commands (all commands
// issued in one turn of the event loop leave in one write; the decisions of
// one limit in that turn share one script call, up to options.batch: of any
// keys for a single token_bucket window, else of one key; so do the lease
// takes of one limit, of any keys; with Redis Cluster, of one key)
// and completes every Decide() within `timeout_ms`, inline when it cannot
// send (disconnected, circuit open, too many commands pending). Not thread-safe:
// use it only from its io_context's thread. RedisHealth is shared and
// thread-safe.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/lease.h"
#include "algorithms/state.h"
#include "store/redis_options.h"
#include "store/redis_scripts.h"
#include "store/store.h"

namespace boost::asio {
class io_context;
}

namespace tollgate::store {

// Connects once, synchronously: authenticates, selects the database and
// loads every script. For startup: nullopt when Redis answers, otherwise a
// sentence naming the problem. `fatal` is set for answers that retrying
// cannot fix (wrong password, unknown database).
std::optional<std::string> CheckRedis(const RedisOptions& options, bool& fatal);

// Redis Cluster: the slot of a key (CRC16 of its hash tag, mod 16384).
inline constexpr int kRedisSlots = 16384;
std::uint16_t RedisSlot(std::string_view key);

// The masters of a cluster by slot range, as CLUSTER SLOTS tells.
struct RedisSlotRange {
  std::int64_t first = 0, last = 0;
  RedisAddress node;
};
using RedisSlotMap = std::vector<RedisSlotRange>;
// Blocking: asks the seeds (`options.nodes`) in turn. For startup.
std::optional<RedisSlotMap> FetchClusterSlots(const RedisOptions& options, std::string& error);

// The Redis key of window `window` of a rule key:
// <prefix>{<escaped key>}:<fingerprint>:<window>. The braces are a Redis
// Cluster hash tag: every key of one rule key lives in one slot. Bytes
// outside [A-Za-z0-9._~/@+=-] are %XX-escaped, the rule/part separator
// becomes ':'.
std::string RedisKey(std::string_view prefix, std::string_view key, std::uint32_t fingerprint,
                     std::size_t window);

// <prefix>{<tag>}:[<middle>:]<suffix>, tag and middle escaped as above: the
// keys of the upstream-protection scripts (all keys of one tag share a
// Cluster slot, as one script needs).
std::string RedisTaggedKey(std::string_view prefix, std::string_view tag, std::string_view middle,
                           std::string_view suffix);

// The script for a limit: one per algorithm for single windows, "multi" for
// several windows. Exposed for tests and benchmarks.
std::string_view RedisScriptFor(const LimitSpec& limit);
// Its SHA-1 as EVALSHA takes it.
const std::string& RedisScriptSha(const LimitSpec& limit);
// The EVALSHA command of one decision (keys built from `prefix` and `key`),
// space-separated for a shell ("" for the empty now_ms of server time).
std::string RedisDecisionCommand(const LimitSpec& limit, std::string_view prefix,
                                 std::string_view key, std::int64_t cost,
                                 std::optional<std::int64_t> now_ms, std::int64_t min_ttl_ms);

// A reply that is an array: its leading integers, then its strings (valid
// when status is kOk).
struct ValuesResult {
  StoreStatus status = StoreStatus::kOk;
  std::vector<std::int64_t> values;
  std::vector<std::string> texts;
};

// Receives exactly one result per call, like CountSink.
class ValuesSink {
 public:
  virtual void OnValues(const ValuesResult& result) = 0;

 protected:
  ~ValuesSink() = default;
};

class RedisStore final : public Store {
 public:
  RedisStore(boost::asio::io_context& io, const RedisOptions& options, RedisHealth& health);
  // Completes every decision still pending with kUnavailable.
  ~RedisStore() override;
  RedisStore(const RedisStore&) = delete;
  RedisStore& operator=(const RedisStore&) = delete;

  void Decide(const DecideRequest& request, DecisionSink& sink) override;
  std::string_view Kind() const override { return "redis"; }

  // Runs an upstream-protection script (store/lua/protect) with `keys` and
  // `args`, pipelined like decisions: `sink` gets its integer reply within
  // `timeout`; a null sink means nobody waits for it.
  void Run(RedisAux script, std::initializer_list<std::string_view> keys,
           std::initializer_list<std::string_view> args, CountSink* sink);
  const RedisOptions& options() const;

  // For the admin API. What `key`'s state allows now under `limit`, without
  // changing it (store/lua/admin/key_peek.lua): `sink` gets five integers
  // per window, remaining, reset_ms, retry_after_ms, level and previous (as
  // algorithms::Inspect's WindowView), within the store's timeout. `now_ms` is used with
  // time = "client" only.
  void Inspect(std::string_view key, const LimitSpec& limit, std::int64_t now_ms, ValuesSink& sink);
  // Settles a reservation (store/lua/settle.lua, as LocalStore::Settle
  // does with algorithms::Settle) in one script call: `sink` gets the
  // key's state after it within the store's timeout (kError if the reply
  // is not one). The reservation's age, request.now_ms - its now_ms, is
  // sent rather than its time, so that it settles under either time
  // setting; request.now_ms is used with time = "client" only otherwise.
  void Settle(const SettleRequest& request, DecisionSink& sink) override;
  // Settles the part of a lease rule's reservation of `key`, made at
  // `reserved_ms`, that the gateway's lease hand could not (LeasingStore::
  // Settle): `refund` units back, or `charge` units more (one of them 0),
  // on the shared window state its leases count in (settle.lua on the
  // lease keys, at `now_ms`). For limits without bucket windows only: a
  // window's lease keys hold its decision state. Nobody waits for the
  // answer.
  void SettleLeased(std::string_view key, const LimitSpec& limit, std::int64_t reserved_ms,
                    std::int64_t now_ms, std::int64_t refund, std::int64_t charge);
  // Deletes `key`'s state under `limit` (key_reset.lua): `sink` gets the
  // number of Redis keys deleted.
  void Reset(std::string_view key, const LimitSpec& limit, CountSink& sink);
  // Leases (docs/leases.md, store/lua/lease): takes up to `want` units of
  // `key`'s budget under `limit` from every window at once, for `use_ms`
  // (lease_ttl), kept by Redis `hold_ms` when not returned. `sink` gets
  // {units, valid_ms, retry_after_ms, one stamp per window} within the
  // store's timeout; for a TakeUse::kSpent take (exactly `want` units or
  // none, admitted at once, no lease kept) {units, 0, retry_after_ms}. `now_ms` is used with time =
  // "client" only. A lease's keys are <prefix>lease:{key}:...: one Cluster slot, like a decision's.
  // Queued as decisions are: the takes of one limit sent in one turn, of
  // distinct keys or not, share one script call (up to options.batch; with
  // Redis Cluster, only those of one key), taken one after the other
  // exactly as separate calls would.
  void TakeLease(std::string_view key, const LimitSpec& limit, std::int64_t now_ms,
                 std::int64_t want, std::int64_t use_ms, std::int64_t hold_ms, ValuesSink& sink,
                 algorithms::TakeUse use = algorithms::TakeUse::kLease);
  // Gives back the `unused` units of a lease of `used + unused` with
  // `stamps`; `sink` (may be null) gets the units given back. `used_at`:
  // when the used units were admitted, on `now_ms`'s clock (LeaseHand::
  // Held::used_at; empty if unknown): sent as ages before `now_ms`, which
  // the script subtracts from its own time, whatever the time setting.
  void ReturnLease(std::string_view key, const LimitSpec& limit, std::int64_t now_ms,
                   std::span<const std::int64_t> stamps, std::int64_t used, std::int64_t unused,
                   std::span<const algorithms::SlidingLog::Run> used_at, CountSink* sink);
  // Runs an admin script that is not about a rule key (the blocks of
  // store/lua/admin/blocks_*.lua): as Run, answered into `count` (an
  // integer reply) or `values` (an array), one of them non-null.
  void RunAdmin(RedisAux script, std::initializer_list<std::string_view> keys,
                std::initializer_list<std::string_view> args, CountSink* count, ValuesSink* values);
  // The same with as many arguments as `args` holds.
  void RunAdmin(RedisAux script, std::initializer_list<std::string_view> keys,
                std::span<const std::string> args, CountSink* count, ValuesSink* values);

 private:
  // TRYAGAIN, or a command's second MOVED: sent again this much later (ms).
  static constexpr int kRetryAfterMs = 5;
  // Defined in store/redis/: connection.h (Shared, Connection), batch.h
  // (Pending). Routing (NodeIndex, LoadSlotMap, Redirect, Retry*) is in
  // store/redis/cluster.cc.
  struct Shared;
  struct Pending;
  class Connection;
  struct Node {
    RedisAddress address;
    std::vector<std::unique_ptr<Connection>> connections;
    std::size_t next = 0;
  };
  // Sends `command` (an EVALSHA whose keys are in `slot`) to be answered
  // into one of the sinks, as Run and Inspect do.
  void Send(std::string command, std::uint16_t slot, CountSink* count, ValuesSink* values);
  // RunAdmin's command, `arg_count` arguments written by `write_args`.
  template <typename WriteArgs>
  void SendAdmin(RedisAux script, std::initializer_list<std::string_view> keys,
                 std::size_t arg_count, WriteArgs write_args, CountSink* count, ValuesSink* values);
  // EVALSHA of `script` with decide.lua's keys and arguments for `key`
  // (under `prefix`, the store's when empty), then `extra` arguments.
  void SendKeyScript(RedisAux script, std::string_view key, const LimitSpec& limit,
                     std::int64_t now_ms, CountSink* count, ValuesSink* values,
                     std::string_view prefix = {}, const std::vector<std::int64_t>& extra = {});
  // A usable connection to the node of `slot`; null (counted as
  // unavailable) when none is.
  Connection* PickConnection(std::int64_t now, std::uint16_t slot);
  // A usable connection to node `node_index`, or null; not counted.
  Connection* PickOnNode(std::int64_t now, std::size_t node_index);
  std::size_t NodeOfSlot(std::uint16_t slot) const;
  // The node at `address`, connected to when new.
  int NodeIndex(const RedisAddress& address);
  // Redis Cluster: the slot map now (startup), from the seeds; MOVED keeps
  // it current.
  void LoadSlotMap();
  // Follows a cluster redirect (MOVED, ASK, TRYAGAIN) for `p`.
  void Redirect(Pending p, std::string_view error);
  // Queues `p` for RetryNow in kRetryAfterMs.
  void RetryLater(Pending p);
  // Sends every queued command again, or fails those past their deadline.
  void RetryNow();

  std::unique_ptr<Shared> shared_;
  std::vector<Node> nodes_;
  std::vector<int> slots_;    // node by slot; empty: one Redis (nodes_[0])
  std::string lease_prefix_;  // <prefix>lease:
  std::string call_;          // Decide's, reused: QueuedCall::call
  // TakeLease's QueuedCall::call: the arguments after the keys, kept for
  // the next take of the same limit and lease (the first tail_bytes; with
  // Redis Cluster the key follows).
  struct LeaseCall {
    std::string text;
    std::size_t tail_bytes = 0;
    const LimitSpec* limit = nullptr;  // with its fingerprint: the same limit
    std::uint32_t fingerprint = 0;
    std::int64_t use_ms = 0;
    std::int64_t hold_ms = 0;
  };
  LeaseCall lease_call_;
  std::string key_;  // Decide's, reused: QueuedCall::key
};

}  // namespace tollgate::store
