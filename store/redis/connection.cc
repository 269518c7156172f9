#include "store/redis/connection.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <boost/asio/post.hpp>

#include "store/redis/sync_connection.h"

namespace tollgate::store {
namespace asio = boost::asio;
using namespace redis;

RedisStore::Connection::Connection(Shared& shared, RedisStore& owner, const RedisAddress& address)
    : shared_(shared), owner_(owner), address_(address), timer_(shared.io), retry_(shared.io) {
  Connect();
}

RedisStore::Connection::~Connection() {
  shutting_down_ = true;
  life_.reset();
  // Completes every pending callback with a null reply (-> kUnavailable).
  if (ac_ != nullptr) redisAsyncFree(ac_);
  FailAll(StoreStatus::kUnavailable);
  if (up_) shared_.health.connections_up.fetch_sub(1, std::memory_order_relaxed);
}

void RedisStore::Connection::Submit(Pending p) {
  if (!Send(p.command)) {
    Fail(p, StoreStatus::kUnavailable);
    return;
  }
  const std::int64_t deadline = p.deadline;
  pending_.push_back(std::move(p));
  ArmDeadline(deadline);
}

void RedisStore::Connection::Queue(const QueuedCall& q, DecisionWaiter waiter) {
  Pending* p = nullptr;
  if (auto it = by_call_.find(q.call); it != by_call_.end() && !it->second->done &&
                                       it->second->waiters.size() < shared_.options.batch) {
    p = it->second;
    shared_.health.coalesced.fetch_add(1, std::memory_order_relaxed);
  } else {
    p = &unsent_.emplace_back(Pending{Kind::kDecide, nullptr, q.deadline, std::string(q.call)});
    p->shape = q.shape;
    p->slot = q.slot;
    by_call_.insert_or_assign(std::string_view(p->command), p);
    ArmDeadline(q.deadline);
    // The write wait fires after the handlers that are ready now have
    // run: the decisions they make join these calls.
    ArmWrite();
  }
  if (q.shape.lease_keys > 0) {
    waiter.key = Pending::AddLeaseKeys(*p, q.key);
  } else if (q.shape.fused_sha != nullptr) {
    waiter.key = Pending::KeyIndex(*p, q.key);
  }
  p->waiters.push_back(waiter);
}

void RedisStore::Connection::Resend(Pending p, bool asking) {
  if (p.done) return;
  if (asking) {
    static constexpr std::string_view kAsking = "*1\r\n$6\r\nASKING\r\n";
    if (Send(kAsking)) {
      pending_.push_back({Kind::kAsking, nullptr, p.deadline});
      ++setup_pending_;
    }
  }
  Submit(std::move(p));
}

void RedisStore::Connection::OnReply(redisAsyncContext*, void* reply, void* privdata) {
  static_cast<Connection*>(privdata)->HandleReply(static_cast<redisReply*>(reply));
}

void RedisStore::Connection::OnConnect(const redisAsyncContext* ac, int status) {
  auto* self = static_cast<Connection*>(ac->data);
  if (status != REDIS_OK) self->Lost(ac->errstr);
}

void RedisStore::Connection::OnDisconnect(const redisAsyncContext* ac, int) {
  static_cast<Connection*>(ac->data)->Lost(ac->err != 0 ? ac->errstr : "closed");
}

void RedisStore::Connection::AddRead(void* p) {
  auto* self = static_cast<Connection*>(p);
  self->want_read_ = true;
  self->ArmRead();
}

void RedisStore::Connection::DelRead(void* p) { static_cast<Connection*>(p)->want_read_ = false; }

void RedisStore::Connection::AddWrite(void* p) {
  auto* self = static_cast<Connection*>(p);
  self->want_write_ = true;
  self->ArmWrite();
}

void RedisStore::Connection::DelWrite(void* p) { static_cast<Connection*>(p)->want_write_ = false; }

void RedisStore::Connection::Cleanup(void* p) {
  auto* self = static_cast<Connection*>(p);
  self->want_read_ = self->want_write_ = false;
  if (self->descriptor_) {
    // hiredis owns and closes the socket.
    self->descriptor_->release();
    self->descriptor_.reset();
  }
}

void RedisStore::Connection::Connect() {
  IgnoreSigpipe();
  const RedisAddress& a = address_;
  redisAsyncContext* ac = redisAsyncConnect(a.host.c_str(), a.port);
  if (ac == nullptr || ac->err != 0) {
    if (ac != nullptr) redisAsyncFree(ac);
    ScheduleReconnect();
    return;
  }
  ac_ = ac;
  ac->data = this;
  descriptor_.emplace(shared_.io, ac->c.fd);
  ac->ev.data = this;
  ac->ev.addRead = &AddRead;
  ac->ev.delRead = &DelRead;
  ac->ev.addWrite = &AddWrite;
  ac->ev.delWrite = &DelWrite;
  ac->ev.cleanup = &Cleanup;
  redisAsyncSetConnectCallback(ac, &OnConnect);
  redisAsyncSetDisconnectCallback(ac, &OnDisconnect);
  // Sending is what completes hiredis's non-blocking connect.
  const std::int64_t deadline = NowMs() + shared_.options.connect_timeout_ms;
  for (const std::string& command : shared_.handshake) {
    if (!Send(command)) return;
    pending_.push_back({Kind::kHandshake, nullptr, deadline});
    ++setup_pending_;
  }
  SendScriptLoads(deadline);
  ArmDeadline(deadline);
}

void RedisStore::Connection::SendScriptLoads(std::int64_t deadline) {
  for (const std::string& command : shared_.script_loads) {
    if (!Send(command)) return;
    pending_.push_back({Kind::kScriptLoad, nullptr, deadline});
    ++setup_pending_;
  }
}

bool RedisStore::Connection::Send(std::string_view command) {
  return ac_ != nullptr && redisAsyncFormattedCommand(ac_, &OnReply, this, command.data(),
                                                      command.size()) == REDIS_OK;
}

void RedisStore::Connection::HandleReply(redisReply* reply) {
  if (pending_.empty()) return;
  Pending p = Pop();
  if (reply == nullptr) {
    Fail(p, StoreStatus::kUnavailable);
    return;
  }
  if (!up_) {
    up_ = true;
    backoff_ms_ = 0;
    shared_.health.connections_up.fetch_add(1, std::memory_order_relaxed);
    spdlog::info("redis {}:{}: connected", address_.host, address_.port);
  }
  switch (p.kind) {
    case Kind::kHandshake:
      if (reply->type == REDIS_REPLY_ERROR) {
        spdlog::error("redis {}:{}: {}", address_.host, address_.port, ErrorText(*reply));
        Drop();
      }
      return;
    case Kind::kScriptLoad:
    case Kind::kAsking:
      return;
    case Kind::kDecide:
    case Kind::kCount:
      break;
  }
  if (reply->type == REDIS_REPLY_ERROR && ErrorText(*reply).starts_with("NOSCRIPT")) {
    // SCRIPT FLUSH or a restarted Redis: load the scripts and send again.
    shared_.health.noscript.fetch_add(1, std::memory_order_relaxed);
    if (p.done) return;
    SendScriptLoads(p.deadline);
    Submit(std::move(p));
    return;
  }
  if (reply->type == REDIS_REPLY_ERROR && IsRedirect(ErrorText(*reply))) {
    // Redis Cluster: the slot lives (or is moving) elsewhere.
    owner_.Redirect(std::move(p), ErrorText(*reply));
    return;
  }
  if (p.kind == Kind::kCount) {
    HandleCount(p, *reply);
    return;
  }
  if (p.shape.lease_keys > 0) {
    HandleLeaseTakes(p, *reply);
    return;
  }
  std::array<algorithms::Decision, RedisOptions::kMaxBatch> decisions;
  const std::size_t n = p.waiters.size();
  if (!ReadDecisions(*reply, n, decisions.data())) {
    ScriptFailed(p, *reply, "the decision script");
    return;
  }
  breaker_.Success();
  if (p.done) return;
  p.done = true;
  for (std::size_t i = 0; i < n; ++i) {
    p.waiters[i].sink->OnDecision({StoreStatus::kOk, ResultSource::kPrimary, decisions[i]});
  }
}

void RedisStore::Connection::HandleCount(Pending& p, const redisReply& reply) {
  if (p.values != nullptr && reply.type == REDIS_REPLY_ARRAY) {
    ValuesResult result;
    std::size_t i = 0;
    for (; i < reply.elements && reply.element[i]->type == REDIS_REPLY_INTEGER; ++i) {
      result.values.push_back(reply.element[i]->integer);
    }
    for (; i < reply.elements && reply.element[i]->type == REDIS_REPLY_STRING; ++i) {
      result.texts.emplace_back(reply.element[i]->str, reply.element[i]->len);
    }
    if (i == reply.elements) {
      breaker_.Success();
      if (!p.done) p.values->OnValues(result);
      return;
    }
  }
  if (p.values != nullptr || reply.type != REDIS_REPLY_INTEGER) {
    ScriptFailed(p, reply, "an upstream-protection or admin script");
    return;
  }
  breaker_.Success();
  if (!p.done && p.count != nullptr) p.count->OnCount({StoreStatus::kOk, reply.integer});
}

void RedisStore::Connection::ScriptFailed(Pending& p, const redisReply& reply,
                                          std::string_view what) {
  shared_.health.errors.fetch_add(1, std::memory_order_relaxed);
  if (reply.type == REDIS_REPLY_ERROR && !error_logged_) {
    error_logged_ = true;
    spdlog::error("redis: {} failed: {}", what, ErrorText(reply));
  }
  breaker_.Failure(NowMs());
  Fail(p, StoreStatus::kError);
}

void RedisStore::Connection::HandleLeaseTakes(Pending& p, const redisReply& reply) {
  // One string: a take's integers per waiter, in their order; all read
  // before any waiter is answered.
  const std::size_t n = p.waiters.size();
  std::vector<std::int64_t>& values = lease_values_;
  values.clear();
  boost::container::small_vector<std::size_t, RedisOptions::kMaxBatch + 1> ends{0};
  bool valid = reply.type == REDIS_REPLY_STRING &&
               static_cast<std::size_t>(std::count(reply.str, reply.str + reply.len, ',')) + 1 == n;
  std::string_view text = valid ? std::string_view(reply.str, reply.len) : std::string_view();
  for (std::size_t i = 0; valid && i < n; ++i) {
    valid = ReadLeaseTake(text, values);
    ends.push_back(values.size());
  }
  if (!valid || !text.empty()) {
    ScriptFailed(p, reply, "the lease take script");
    return;
  }
  breaker_.Success();
  if (p.done) return;
  p.done = true;
  ValuesResult result;
  for (std::size_t i = 0; i < n; ++i) {
    result.values.assign(values.begin() + static_cast<std::ptrdiff_t>(ends[i]),
                         values.begin() + static_cast<std::ptrdiff_t>(ends[i + 1]));
    p.waiters[i].values->OnValues(result);
  }
}

RedisStore::Pending RedisStore::Connection::Pop() {
  Pending p = std::move(pending_.front());
  pending_.pop_front();
  if (p.kind != Kind::kDecide && p.kind != Kind::kCount) --setup_pending_;
  return p;
}

void RedisStore::Connection::FailAll(StoreStatus status) {
  by_call_.clear();
  while (!unsent_.empty()) {
    Pending p = std::move(unsent_.front());
    unsent_.pop_front();
    Fail(p, status);
  }
  while (!pending_.empty()) {
    Pending p = Pop();
    Fail(p, status);
  }
}

void RedisStore::Connection::SendUnsent() {
  by_call_.clear();
  // New decisions that the failures below make queue for the next write.
  flushing_.swap(unsent_);
  while (!flushing_.empty()) {
    Pending p = std::move(flushing_.front());
    flushing_.pop_front();
    if (p.done) continue;
    p.command = Pending::CallCommand(p);
    p.keys.clear();
    p.key_hashes.clear();
    Submit(std::move(p));
  }
}

void RedisStore::Connection::Lost(const char* why) {
  if (ac_ == nullptr) return;
  ac_ = nullptr;
  FailAll(StoreStatus::kUnavailable);
  if (up_) {
    up_ = false;
    shared_.health.connections_up.fetch_sub(1, std::memory_order_relaxed);
    if (!shutting_down_) {
      spdlog::warn("redis {}:{}: connection lost: {}", address_.host, address_.port, why);
    }
  }
  if (!shutting_down_) ScheduleReconnect();
}

void RedisStore::Connection::Drop() {
  asio::post(shared_.io, [this, life = std::weak_ptr<char>(life_)] {
    if (life.expired() || ac_ == nullptr) return;
    redisAsyncContext* ac = ac_;
    redisAsyncFree(ac);  // -> OnDisconnect/Lost
    Lost("dropped");
  });
}

void RedisStore::Connection::ScheduleReconnect() {
  backoff_ms_ = backoff_ms_ == 0 ? 25 : std::min(backoff_ms_ * 2, shared_.options.max_backoff_ms);
  retry_.expires_after(std::chrono::milliseconds(backoff_ms_));
  retry_.async_wait([this, life = std::weak_ptr<char>(life_)](boost::system::error_code ec) {
    if (ec || life.expired() || ac_ != nullptr) return;
    Connect();
  });
}

void RedisStore::Connection::ArmRead() {
  if (reading_ || !descriptor_) return;
  reading_ = true;
  descriptor_->async_wait(
      asio::posix::stream_descriptor::wait_read,
      [this, life = std::weak_ptr<char>(life_)](boost::system::error_code ec) {
        if (life.expired()) return;
        reading_ = false;
        if (ec || ac_ == nullptr) return;
        if (want_read_) redisAsyncHandleRead(ac_);
        if (want_read_ && ac_ != nullptr) ArmRead();
      });
}

void RedisStore::Connection::ArmWrite() {
  if (writing_ || !descriptor_) return;
  writing_ = true;
  descriptor_->async_wait(
      asio::posix::stream_descriptor::wait_write,
      [this, life = std::weak_ptr<char>(life_)](boost::system::error_code ec) {
        if (life.expired()) return;
        if (ec || ac_ == nullptr) {
          writing_ = false;
          return;
        }
        // (Still `writing_`: hiredis's AddWrite for these waits no more.)
        SendUnsent();
        writing_ = false;
        if (want_write_ && ac_ != nullptr) redisAsyncHandleWrite(ac_);
        if ((want_write_ || !unsent_.empty()) && ac_ != nullptr) ArmWrite();
      });
}

void RedisStore::Connection::ArmDeadline(std::int64_t deadline) {
  if (deadline >= armed_for_) return;
  armed_for_ = deadline;
  timer_.expires_at(Steady::time_point(std::chrono::milliseconds(deadline)));
  timer_.async_wait([this, life = std::weak_ptr<char>(life_)](boost::system::error_code ec) {
    if (ec || life.expired()) return;  // aborted: re-armed earlier, or closing
    armed_for_ = std::numeric_limits<std::int64_t>::max();
    ExpireOverdue();
  });
}

void RedisStore::Connection::ExpireOverdue() {
  const std::int64_t now = NowMs();
  std::int64_t next = std::numeric_limits<std::int64_t>::max();
  bool handshake_overdue = false;
  // By index: a sink may send another decision, which appends.
  for (std::deque<Pending>* queue : {&unsent_, &pending_}) {
    for (std::size_t i = 0; i < queue->size(); ++i) {
      Pending& p = (*queue)[i];
      if (p.kind != Kind::kDecide && p.kind != Kind::kCount) {
        if (p.deadline <= now && !up_) handshake_overdue = true;
        continue;
      }
      if (p.done) continue;
      if (p.deadline > now) {
        next = std::min(next, p.deadline);
        continue;
      }
      shared_.health.timeouts.fetch_add(std::max<std::size_t>(1, p.waiters.size()),
                                        std::memory_order_relaxed);
      breaker_.Failure(now);
      // Taken out first: a sink may queue another decision (which may
      // join an unsent call, or append to a queue).
      Pending overdue{p.kind, p.count, p.deadline};
      overdue.values = p.values;
      overdue.waiters = std::move(p.waiters);
      p.waiters.clear();
      p.done = true;
      Fail(overdue, StoreStatus::kTimeout);
    }
  }
  if (handshake_overdue) {
    Drop();
    return;
  }
  if (next != std::numeric_limits<std::int64_t>::max()) ArmDeadline(next);
}

}  // namespace tollgate::store
