#include "store/redis_store.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "store/redis/batch.h"
#include "store/redis/connection.h"
#include "store/redis/protocol.h"

namespace tollgate::store {
namespace asio = boost::asio;
using namespace redis;

RedisStore::RedisStore(asio::io_context& io, const RedisOptions& options, RedisHealth& health)
    : shared_(std::make_unique<Shared>(io, options, health)),
      lease_prefix_(options.prefix + "lease:") {
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

void RedisStore::Send(std::string command, std::uint16_t slot, CountSink* count,
                      ValuesSink* values) {
  const std::int64_t now = NowMs();
  Connection* connection = PickConnection(now, slot);
  if (connection == nullptr) {
    if (count != nullptr) count->OnCount({StoreStatus::kUnavailable, 0});
    if (values != nullptr) values->OnValues({StoreStatus::kUnavailable, {}, {}});
    return;
  }
  Pending p{PendingKind::kCount, count, now + shared_->options.timeout_ms, std::move(command)};
  p.values = values;
  p.slot = slot;
  connection->Submit(std::move(p));
}

void RedisStore::Run(RedisAux script, std::initializer_list<std::string_view> keys,
                     std::initializer_list<std::string_view> args, CountSink* sink) {
  RunAdmin(script, keys, args, sink, nullptr);
}

template <typename WriteArgs>
void RedisStore::SendAdmin(RedisAux script, std::initializer_list<std::string_view> keys,
                           std::size_t arg_count, WriteArgs write_args, CountSink* count,
                           ValuesSink* values) {
  const std::uint16_t slot = keys.size() > 0 && !slots_.empty() ? RedisSlot(*keys.begin()) : 0;
  std::string command;
  RespWriter w(command);
  w.Count(3 + keys.size() + arg_count);
  w.Arg("EVALSHA");
  w.Arg(ScriptSha(RedisScriptIndex(script)));
  w.Arg(static_cast<std::int64_t>(keys.size()));
  for (std::string_view k : keys) w.Arg(k);
  write_args(w);
  Send(std::move(command), slot, count, values);
}

void RedisStore::RunAdmin(RedisAux script, std::initializer_list<std::string_view> keys,
                          std::initializer_list<std::string_view> args, CountSink* count,
                          ValuesSink* values) {
  SendAdmin(
      script, keys, args.size(),
      [&](RespWriter& w) {
        for (std::string_view a : args) w.Arg(a);
      },
      count, values);
}

void RedisStore::RunAdmin(RedisAux script, std::initializer_list<std::string_view> keys,
                          std::span<const std::string> args, CountSink* count,
                          ValuesSink* values) {
  SendAdmin(
      script, keys, args.size(),
      [&](RespWriter& w) {
        for (const std::string& a : args) w.Arg(a);
      },
      count, values);
}

void RedisStore::SendKeyScript(RedisAux script, std::string_view key, const LimitSpec& limit,
                               std::int64_t now_ms, CountSink* count, ValuesSink* values,
                               std::string_view prefix, const std::vector<std::int64_t>& extra) {
  const RedisOptions& o = shared_->options;
  std::optional<std::int64_t> now;
  if (o.time == RedisTime::kClient) now = limit.TimeOf(now_ms);
  std::string command;
  RespWriter w(command);
  w.Count(HeadArgCount(limit) + extra.size());
  w.Arg("EVALSHA");
  w.Arg(ScriptSha(RedisScriptIndex(script)));
  const std::string first_key =
      WriteDecideArgs(limit, prefix.empty() ? std::string_view(o.prefix) : prefix, key, now,
                      o.min_ttl_ms, w);
  for (std::int64_t v : extra) w.Arg(v);
  Send(std::move(command), slots_.empty() ? 0 : RedisSlot(first_key), count, values);
}

void RedisStore::TakeLease(std::string_view key, const LimitSpec& limit, std::int64_t now_ms,
                           std::int64_t want, std::int64_t use_ms, std::int64_t hold_ms,
                           ValuesSink& sink, algorithms::TakeUse use) {
  // Queued as decisions are: the takes of one limit in one turn share a
  // lease_take.lua call (with Redis Cluster, a call per key, as its keys
  // must share a slot).
  const std::int64_t now = NowMs();
  const RedisOptions& o = shared_->options;
  std::optional<std::int64_t> time;
  if (o.time == RedisTime::kClient) time = limit.TimeOf(now_ms);
  // A single bucket window: lease_take_fused.lua, the same call in
  // straight-line code, with the window's state key alone.
  const algorithms::Algorithm a = limit.windows[0].algorithm;
  const bool bucket = limit.windows.size() == 1 && (a == algorithms::Algorithm::kTokenBucket ||
                                                     a == algorithms::Algorithm::kLeakyBucket);
  const RedisAux script = bucket ? RedisAux::kLeaseTakeFused : RedisAux::kLeaseTake;
  // The arguments after the keys are the same for every take of a limit
  // under server time: written once per limit in a row.
  LeaseCall& call = lease_call_;
  const bool reuse = !time && slots_.empty() && call.limit == &limit &&
                     call.fingerprint == limit.fingerprint &&
                     call.use_ms == use_ms && call.hold_ms == hold_ms && !call.text.empty();
  if (!reuse) {
    call.text.clear();
    RespWriter w(call.text);
    WriteDecideParams(limit, time, o.min_ttl_ms, w);
    w.Arg(use_ms);
    w.Arg(hold_ms);
    call.limit = &limit;
    call.fingerprint = limit.fingerprint;
    call.use_ms = use_ms;
    call.hold_ms = hold_ms;
    call.tail_bytes = call.text.size();
  }
  call.text.resize(call.tail_bytes);
  QueuedCall q;
  q.shape = {DecideParamCount(limit) + 2, &ScriptSha(RedisScriptIndex(script)), call.tail_bytes,
             bucket ? 1 : 2 * limit.windows.size()};
  key_.clear();
  RespWriter keys(key_);
  std::string first_key;
  if (bucket) {
    first_key = RedisKey(lease_prefix_, key, limit.fingerprint, 0);
    keys.Arg(first_key);
  } else {
    first_key = WriteDecideKeys(limit, lease_prefix_, key, keys);
  }
  q.key = key_;
  if (!slots_.empty()) call.text.append(key_);
  q.call = call.text;
  q.slot = slots_.empty() ? 0 : RedisSlot(first_key);
  q.deadline = now + o.timeout_ms;
  Connection* connection = PickConnection(now, q.slot);
  if (connection == nullptr) {
    sink.OnValues({StoreStatus::kUnavailable, {}, {}});
    return;
  }
  // The scripts read a negative want as a spent take.
  connection->Queue(q, {nullptr, use == algorithms::TakeUse::kSpent ? -want : want, 0, &sink});
}

void RedisStore::ReturnLease(std::string_view key, const LimitSpec& limit, std::int64_t now_ms,
                             std::span<const std::int64_t> stamps, std::int64_t used,
                             std::int64_t unused,
                             std::span<const algorithms::SlidingLog::Run> used_at,
                             CountSink* sink) {
  std::vector<std::int64_t> extra = {used, unused};
  extra.insert(extra.end(), stamps.begin(), stamps.end());
  // Ages, not times: the script's clock may be Redis's (time = "redis").
  for (const algorithms::SlidingLog::Run& r : used_at) {
    extra.push_back(std::max<std::int64_t>(0, now_ms - r.ts));
    extra.push_back(r.count);
  }
  SendKeyScript(RedisAux::kLeaseReturn, key, limit, now_ms, sink, nullptr, lease_prefix_, extra);
}

void RedisStore::Inspect(std::string_view key, const LimitSpec& limit, std::int64_t now_ms,
                         ValuesSink& sink) {
  SendKeyScript(RedisAux::kKeyPeek, key, limit, now_ms, nullptr, &sink);
}

namespace {

// Answers a settle's DecisionSink from settle.lua's reply, then frees
// itself: it lives from the call until the reply or the deadline.
class SettleReply final : public ValuesSink {
 public:
  explicit SettleReply(DecisionSink& sink) : sink_(sink) {}
  void OnValues(const ValuesResult& r) override {
    StoreResult out{r.status, ResultSource::kPrimary, {}};
    if (r.status == StoreStatus::kOk) {
      if (r.values.size() == kDecisionValues) {
        out.decision = DecisionOfValues(r.values.data());
      } else {
        out.status = StoreStatus::kError;
      }
    }
    DecisionSink& sink = sink_;
    delete this;
    sink.OnDecision(out);
  }

 private:
  DecisionSink& sink_;
};

}  // namespace

void RedisStore::Settle(const SettleRequest& request, DecisionSink& sink) {
  const DecideRequest& r = request.reservation;
  // On the algorithm's time scale: a calendar's reservation made in an
  // earlier period is that much older there.
  const LimitSpec& limit = *r.limit;
  const std::int64_t age = limit.TimeOf(request.now_ms) - limit.TimeOf(r.now_ms);
  const std::vector<std::int64_t> extra = {std::max<std::int64_t>(0, age), r.cost, request.actual};
  SendKeyScript(RedisAux::kSettle, r.key, *r.limit, request.now_ms, nullptr, new SettleReply(sink),
                {}, extra);
}

void RedisStore::SettleLeased(std::string_view key, const LimitSpec& limit,
                              std::int64_t reserved_ms, std::int64_t now_ms, std::int64_t refund,
                              std::int64_t charge) {
  const std::int64_t age = limit.TimeOf(now_ms) - limit.TimeOf(reserved_ms);
  // As a reservation of `refund` units settled to none, or of none to
  // `charge` units.
  SendKeyScript(RedisAux::kSettle, key, limit, now_ms, nullptr, nullptr, lease_prefix_,
                {std::max<std::int64_t>(0, age), refund, charge});
}

void RedisStore::Reset(std::string_view key, const LimitSpec& limit, CountSink& sink) {
  SendKeyScript(RedisAux::kKeyReset, key, limit, 0, &sink, nullptr);
}

void RedisStore::Decide(const DecideRequest& request, DecisionSink& sink) {
  const std::int64_t now = NowMs();
  const LimitSpec& limit = *request.limit;
  const RedisOptions& o = shared_->options;
  std::optional<std::int64_t> now_ms;
  if (o.time == RedisTime::kClient) now_ms = limit.TimeOf(request.now_ms);
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
