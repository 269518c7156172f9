// Internal to the Redis store: the asynchronous connection to Redis
// (RedisStore::Connection: hiredis on the thread's io_context, pipelining,
// the batching queue, deadlines, reconnecting with backoff, the handshake
// and script loads on every connection) behind its circuit breaker
// (breaker.h). The blocking connection of startup checks is in
// sync_connection.h.
#pragma once

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/unordered/unordered_flat_map.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "store/redis/batch.h"
#include "store/redis/breaker.h"
#include "store/redis/protocol.h"
#include "store/redis_options.h"
#include "store/redis_store.h"

namespace tollgate::store {
namespace redis {

using Steady = std::chrono::steady_clock;

// The gateway's clock (one reading per handler on its threads), on which
// command deadlines and the retry timer are set.
inline std::int64_t NowMs() { return SteadyClock().NowMs(); }

}  // namespace redis

struct RedisStore::Shared {
  Shared(boost::asio::io_context& i, const RedisOptions& o, RedisHealth& h)
      : io(i), options(o), health(h), retry_timer(i) {
    // A reply is read into an array of kMaxBatch decisions.
    options.batch = std::min(options.batch, RedisOptions::kMaxBatch);
  }
  boost::asio::io_context& io;
  RedisOptions options;
  RedisHealth& health;
  std::vector<std::string> handshake;     // AUTH/SELECT as RESP (HandshakeCommands)
  std::vector<std::string> script_loads;  // SCRIPT LOAD of every script as RESP
  std::deque<Pending> retry;              // TRYAGAIN, MOVED again: sent when retry_timer fires
  boost::asio::steady_timer retry_timer;
};

// One hiredis asynchronous connection on Asio: hiredis's event hooks
// (addRead/delRead/addWrite/delWrite/cleanup) become waits on a
// stream_descriptor over hiredis's socket. Replies arrive in command order,
// so pending_ is a FIFO matched one to one with hiredis's callbacks.
class RedisStore::Connection {
 public:
  Connection(Shared& shared, RedisStore& owner, const RedisAddress& address);
  ~Connection();

  // Whether a decision may be sent now. While the circuit is open one probe
  // per breaker_open_ms goes through.
  bool Usable(std::int64_t now) {
    if (ac_ == nullptr ||
        pending_.size() - setup_pending_ + unsent_.size() >= shared_.options.max_pending) {
      return false;
    }
    return breaker_.Allow(now);
  }

  // Sends `p` (a decision or a count) and awaits its reply until its
  // deadline; completes it at once when it cannot be sent.
  void Submit(Pending p);

  // Adds a decision to the script call this connection writes next: the
  // call with the same QueuedCall::call (the same limit and time, and for
  // decide.lua the same key) while it has room for more (options.batch),
  // or a new one. So concurrent decisions of one limit cost Redis one call,
  // decided one after the other exactly as separate calls would be. Lease
  // takes (CallShape::lease_keys) of one limit share calls the same way.
  void Queue(const redis::QueuedCall& q, redis::DecisionWaiter waiter);

  // Sends `p` again here (a cluster redirect); `asking`: after ASKING.
  void Resend(Pending p, bool asking);

  // Completes `p` (once) with a failure.
  void Fail(Pending& p, StoreStatus status) { p.Fail(status, shared_.health); }

 private:
  using Kind = redis::PendingKind;

  // hiredis's callbacks and event hooks (privdata, ev.data: the Connection).
  static void OnReply(redisAsyncContext*, void* reply, void* privdata);
  static void OnConnect(const redisAsyncContext* ac, int status);
  static void OnDisconnect(const redisAsyncContext* ac, int);
  static void AddRead(void* p);
  static void DelRead(void* p);
  static void AddWrite(void* p);
  static void DelWrite(void* p);
  static void Cleanup(void* p);

  // Connects, then sends the handshake and the script loads.
  void Connect();
  void SendScriptLoads(std::int64_t deadline);
  bool Send(std::string_view command);
  void HandleReply(redisReply* reply);
  void HandleCount(Pending& p, const redisReply& reply);
  // The reply of a lease_take.lua call (CallShape::lease_keys).
  void HandleLeaseTakes(Pending& p, const redisReply& reply);
  // A script's reply that is an error or not what it returns: counted,
  // logged (the first time), and `p` failed with kError.
  void ScriptFailed(Pending& p, const redisReply& reply, std::string_view what);
  Pending Pop();
  void FailAll(StoreStatus status);
  // Writes the queued decisions' script calls (Queue).
  void SendUnsent();

  // The connection is gone (hiredis frees the context after this).
  void Lost(const char* why);
  // Closes the connection from outside hiredis's callbacks.
  void Drop();
  void ScheduleReconnect();

  void ArmRead();
  void ArmWrite();
  void ArmDeadline(std::int64_t deadline);
  void ExpireOverdue();

  Shared& shared_;
  RedisStore& owner_;
  const RedisAddress address_;
  redisAsyncContext* ac_ = nullptr;
  std::optional<boost::asio::posix::stream_descriptor> descriptor_;
  boost::asio::steady_timer timer_;  // the earliest deadline of pending_
  boost::asio::steady_timer retry_;  // reconnect backoff
  std::int64_t armed_for_ = std::numeric_limits<std::int64_t>::max();
  std::deque<Pending> pending_;
  // Decisions not yet written (Queue), by their QueuedCall::call (views of
  // their `command`).
  std::deque<Pending> unsent_;
  std::deque<Pending> flushing_;  // SendUnsent's
  boost::unordered_flat_map<std::string_view, Pending*, std::hash<std::string_view>> by_call_;
  std::size_t setup_pending_ = 0;  // handshake and script loads in pending_: not bounded
  std::shared_ptr<char> life_ = std::make_shared<char>();  // handlers check it
  bool want_read_ = false;
  bool want_write_ = false;
  bool reading_ = false;
  bool writing_ = false;
  bool up_ = false;
  bool shutting_down_ = false;
  bool error_logged_ = false;
  std::vector<std::int64_t> lease_values_;  // HandleLeaseTakes's, reused
  std::int64_t backoff_ms_ = 0;
  redis::CircuitBreaker breaker_{shared_.options, shared_.health};
};

}  // namespace tollgate::store
