#include "store/redis_store.h"

#include <spdlog/spdlog.h>

#include "store/redis/batch.h"
#include "store/redis/connection.h"
#include "store/redis/protocol.h"

namespace tollgate::store {
namespace asio = boost::asio;
using namespace redis;

RedisStore::RedisStore(asio::io_context& io, const RedisOptions& options, RedisHealth& health)
    : shared_(std::make_unique<Shared>(io, options, health)) {
  const RedisAddress& credentials = options.nodes.empty() ? options.address : options.nodes[0];
  for (const Command& c : HandshakeCommands(credentials)) shared_->handshake.push_back(Resp(c));
  for (int i = 0; i < kRedisScriptCount; ++i) shared_->script_loads.push_back(Resp(ScriptLoad(i)));
  if (options.nodes.empty()) {
    NodeIndex(options.address);
    return;
  }
  LoadSlotMap();  // Redis Cluster
}

RedisStore::~RedisStore() {
  for (Pending& p : shared_->retry) p.Fail(StoreStatus::kUnavailable, shared_->health);
  shared_->retry.clear();
  nodes_.clear();  // completes what is pending on the connections
}

RedisStore::Connection* RedisStore::PickOnNode(std::int64_t now, std::size_t node_index) {
  Node& node = nodes_[node_index];
  const std::size_t n = node.connections.size();
  for (std::size_t i = 0; i < n; ++i) {
    Connection* c = node.connections[node.next++ % n].get();
    if (c->Usable(now)) return c;
  }
  return nullptr;
}

std::size_t RedisStore::NodeOfSlot(std::uint16_t slot) const {
  return slots_.empty() ? 0 : static_cast<std::size_t>(slots_[slot]);
}

RedisStore::Connection* RedisStore::PickConnection(std::int64_t now, std::uint16_t slot) {
  Connection* c = PickOnNode(now, NodeOfSlot(slot));
  if (c == nullptr) shared_->health.unavailable.fetch_add(1, std::memory_order_relaxed);
  return c;
}

const RedisOptions& RedisStore::options() const { return shared_->options; }

void RedisStore::Run(RedisAux script, std::initializer_list<std::string_view> keys,
                     std::initializer_list<std::string_view> args, CountSink* sink) {
  const std::int64_t now = NowMs();
  const std::uint16_t slot = keys.size() > 0 && !slots_.empty() ? RedisSlot(*keys.begin()) : 0;
  Connection* connection = PickConnection(now, slot);
  if (connection == nullptr) {
    if (sink != nullptr) sink->OnCount({StoreStatus::kUnavailable, 0});
    return;
  }
  std::string command;
  RespWriter w(command);
  w.Count(3 + keys.size() + args.size());
  w.Arg("EVALSHA");
  w.Arg(ScriptSha(RedisScriptIndex(script)));
  w.Arg(static_cast<std::int64_t>(keys.size()));
  for (std::string_view k : keys) w.Arg(k);
  for (std::string_view a : args) w.Arg(a);
  Pending p{PendingKind::kCount, sink, now + shared_->options.timeout_ms, std::move(command)};
  p.slot = slot;
  connection->Submit(std::move(p));
}

void RedisStore::Decide(const DecideRequest& request, DecisionSink& sink) {
  const std::int64_t now = NowMs();
  const LimitSpec& limit = *request.limit;
  const RedisOptions& o = shared_->options;
  std::optional<std::int64_t> now_ms;
  if (o.time == RedisTime::kClient) now_ms = request.now_ms;
  std::string& call = call_;
  call.clear();
  RespWriter w(call);
  QueuedCall q;
  std::string first_key;
  if (FusedTokenBucket(limit)) {
    WriteFusedTail(limit, now_ms, o.min_ttl_ms, w);
    q.shape = {kFusedTailArgs, &ScriptSha(ScriptIndex(limit)), call.size()};
    first_key = RedisKey(o.prefix, request.key, limit.fingerprint, 0);
    key_.clear();
    RespWriter(key_).Arg(first_key);
    q.key = key_;
    // Keys of one call must share a slot: with Redis Cluster, a call per key.
    if (!slots_.empty()) call.append(key_);
  } else {
    first_key = WriteEvalshaHead(limit, o.prefix, request.key, now_ms, o.min_ttl_ms, w);
    q.shape.args = HeadArgCount(limit);
  }
  q.call = call;
  q.slot = slots_.empty() ? 0 : RedisSlot(first_key);
  q.deadline = now + o.timeout_ms;
  Connection* connection = PickConnection(now, q.slot);
  if (connection == nullptr) {
    sink.OnDecision({StoreStatus::kUnavailable, ResultSource::kPrimary, {}});
    return;
  }
  connection->Queue(q, {&sink, request.cost});
}

}  // namespace tollgate::store
