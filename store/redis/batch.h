// Internal to the Redis store: decisions batched into script calls. What a
// decision brings to a connection's queue (QueuedCall), the command that
// waits there and then for its reply (RedisStore::Pending: a script call
// with the decisions that share it, or another command), and the text of a
// batched call (RedisStore::Pending::CallCommand).
#pragma once

#include <boost/container/small_vector.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "store/redis_options.h"
#include "store/redis_store.h"
#include "store/store.h"

namespace tollgate::store {
namespace redis {

enum class PendingKind : std::uint8_t { kDecide, kCount, kHandshake, kScriptLoad, kAsking };

// A decision waiting in a script call: its cost and, in a
// token_bucket_fused.lua call, the index of its key in the call's keys. Or
// a lease take in a lease_take.lua call (`values` set, `sink` null): its
// `want` as the cost, its keys at index `key`.
struct DecisionWaiter {
  DecisionSink* sink;
  std::int64_t cost;
  std::uint32_t key = 0;
  ValuesSink* values = nullptr;
};

// How the text of a queued script call (QueuedCall::call) becomes its
// command (Pending::CallCommand).
struct CallShape {
  // decide.lua: the text is the RESP arguments before the costs, `args` of
  // them. token_bucket_fused.lua: its first `tail_bytes` bytes are the
  // `args` arguments after the keys and before the costs.
  std::size_t args = 0;
  const std::string* fused_sha = nullptr;  // token_bucket_fused.lua's; null: decide.lua
  std::size_t tail_bytes = 0;
  // lease_take.lua (then fused_sha is its SHA-1): the keys of one take (two
  // per window; lease_take_fused.lua: one). Its text is laid out as
  // token_bucket_fused.lua's, with every take's keys (RedisStore::
  // TakeLease) and `want` instead of a cost, and one take per keys: the
  // takes are never merged, only sent in one call.
  std::size_t lease_keys = 0;
};

// A decision for Connection::Queue: decisions with the same `call` share a
// script call.
struct QueuedCall {
  // See CallShape; for token_bucket_fused.lua with Redis Cluster followed by
  // the key, so that a call has one key and one slot.
  std::string_view call;
  CallShape shape;
  std::string_view key;  // token_bucket_fused.lua: the key, one RESP argument
  std::uint16_t slot = 0;
  std::int64_t deadline = 0;
};

}  // namespace redis

// A command awaiting its reply on a connection (or, for decisions, its
// turn to be written: see Connection::Queue).
struct RedisStore::Pending {
  redis::PendingKind kind;
  CountSink* count = nullptr;  // kCount; null: nobody waits
  std::int64_t deadline = 0;
  // kDecide, kCount: resent after NOSCRIPT or a redirect. A kDecide not yet
  // written holds its QueuedCall::call instead.
  std::string command{};
  bool done = false;       // completed (timed out): its reply is dropped
  int moved = 0;           // Redis Cluster MOVED answers followed so far
  int moved_to = -1;       // the node its last MOVED named (routes it without a slot map)
  std::uint16_t slot = 0;  // of its keys (Redis Cluster routing)
  // kDecide: the decisions of this script call (once written: in the order
  // of its costs and replies).
  boost::container::small_vector<redis::DecisionWaiter, 1> waiters{};
  // kDecide not yet written: how its command is written; the keys of a
  // token_bucket_fused.lua call as RESP arguments, and their hashes.
  redis::CallShape shape{};
  boost::container::small_vector<std::string, 1> keys{};
  boost::container::small_vector<std::size_t, 1> key_hashes{};
  // kCount whose reply is an array of integers instead (then count is null).
  ValuesSink* values = nullptr;

  // Completes it (once) with a failure.
  void Fail(StoreStatus status, RedisHealth& health) {
    if (done) return;
    done = true;
    if (status == StoreStatus::kUnavailable) {
      health.unavailable.fetch_add(kind == redis::PendingKind::kDecide ? waiters.size() : 1,
                                   std::memory_order_relaxed);
    }
    for (const redis::DecisionWaiter& w : waiters) {
      if (w.values != nullptr) {
        w.values->OnValues({status, {}, {}});
      } else {
        w.sink->OnDecision({status, ResultSource::kPrimary, {}});
      }
    }
    if (kind == redis::PendingKind::kCount && count != nullptr) count->OnCount({status, 0});
    if (kind == redis::PendingKind::kCount && values != nullptr) values->OnValues({status, {}, {}});
  }

  // The index of `key` among the keys of `p`, a token_bucket_fused.lua
  // call; added if new.
  static std::uint32_t KeyIndex(Pending& p, std::string_view key) {
    const std::size_t hash = std::hash<std::string_view>{}(key);
    for (std::size_t i = 0; i < p.keys.size(); ++i) {
      if (p.key_hashes[i] == hash && p.keys[i] == key) return static_cast<std::uint32_t>(i);
    }
    p.keys.emplace_back(key);
    p.key_hashes.push_back(hash);
    return static_cast<std::uint32_t>(p.keys.size() - 1);
  }

  // Adds a lease take's keys (one RESP argument each, concatenated) to
  // `p`, a lease_take.lua call: their index.
  static std::uint32_t AddLeaseKeys(Pending& p, std::string_view keys) {
    p.keys.emplace_back(keys);
    return static_cast<std::uint32_t>(p.keys.size() - 1);
  }

  // The whole command of a queued call (Connection::Queue), its costs
  // included; its waiters in the order of the costs.
  static std::string CallCommand(Pending& p);
};

}  // namespace tollgate::store
