#include "store/redis/batch.h"

#include "store/redis/protocol.h"

namespace tollgate::store {
using namespace redis;

std::string RedisStore::Pending::CallCommand(Pending& p) {
  std::string command;
  command.reserve(p.command.size() + 16 + 8 * p.waiters.size());
  RespWriter w(command);
  const CallShape& shape = p.shape;
  if (shape.fused_sha == nullptr) {
    w.Count(shape.args + p.waiters.size());
    command.append(p.command);
    for (const DecisionWaiter& waiter : p.waiters) w.Arg(waiter.cost);
    return command;
  }
  // EVALSHA sha numkeys keys... tail, then token_bucket_fused.lua: per key,
  // count, costs; lease_take.lua: every take's want (one take per keys,
  // in their order already).
  const std::size_t keys = p.keys.size();
  const bool lease = shape.lease_keys > 0;
  const std::size_t key_args = lease ? shape.lease_keys * keys : keys;
  w.Count(3 + key_args + shape.args + (lease ? 0 : keys) + p.waiters.size());
  w.Arg("EVALSHA");
  w.Arg(*shape.fused_sha);
  w.Arg(static_cast<std::int64_t>(key_args));
  for (const std::string& key : p.keys) command.append(key);
  command.append(p.command, 0, shape.tail_bytes);
  if (lease) {
    for (const DecisionWaiter& waiter : p.waiters) w.Arg(waiter.cost);
    return command;
  }
  // Grouped by key, stably: an insertion sort, as the waiters are few and
  // mostly in order already (keys are numbered as they first come).
  for (std::size_t i = 1; i < p.waiters.size(); ++i) {
    const DecisionWaiter moving = p.waiters[i];
    std::size_t j = i;
    for (; j > 0 && p.waiters[j - 1].key > moving.key; --j) p.waiters[j] = p.waiters[j - 1];
    p.waiters[j] = moving;
  }
  for (std::size_t i = 0; i < p.waiters.size();) {
    std::size_t end = i;
    while (end < p.waiters.size() && p.waiters[end].key == p.waiters[i].key) ++end;
    w.Arg(static_cast<std::int64_t>(end - i));
    for (; i < end; ++i) w.Arg(p.waiters[i].cost);
  }
  return command;
}

}  // namespace tollgate::store
