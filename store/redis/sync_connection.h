// Internal to the Redis store: the blocking connection of startup checks
// (CheckRedis, the cluster's slot map at startup), never used on an I/O
// thread.
#pragma once

#include <fmt/format.h>
#include <hiredis/hiredis.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "store/redis/protocol.h"
#include "store/redis_options.h"

namespace tollgate::store::redis {

// hiredis writes with plain write(): a connection Redis has closed would
// raise SIGPIPE, whose default action ends the process. Ignored once, before
// the first connection, so such a write fails with EPIPE like any other.
void IgnoreSigpipe();

// A blocking connection for startup checks (never on an I/O thread).
class SyncConnection {
 public:
  SyncConnection(const RedisAddress& a, std::int64_t timeout_ms)
      : where_(fmt::format("redis {}:{}", a.host, a.port)),
        c_(redisConnectWithTimeout(a.host.c_str(), a.port, Timeval(timeout_ms)), &redisFree) {
    IgnoreSigpipe();
    if (c_ && c_->err == 0) redisSetTimeout(c_.get(), Timeval(timeout_ms));
  }
  bool Connected() const { return c_ && c_->err == 0; }
  std::string ConnectError() const {
    return fmt::format("{}: cannot connect: {}", where_, c_ ? c_->errstr : "out of memory");
  }
  const std::string& Where() const { return where_; }
  // The reply (null when the connection failed); `text` is set to the
  // error when there is one.
  std::unique_ptr<redisReply, void (*)(void*)> Run(const Command& args, std::string& text) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const std::string& s : args) {
      argv.push_back(s.data());
      lens.push_back(s.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(c_.get(), static_cast<int>(argv.size()), argv.data(), lens.data()));
    std::unique_ptr<redisReply, void (*)(void*)> reply(r, &freeReplyObject);
    text.clear();
    if (!reply) {
      text = c_->errstr;
    } else if (reply->type == REDIS_REPLY_ERROR) {
      text = std::string(ErrorText(*reply));
    }
    return reply;
  }

 private:
  static timeval Timeval(std::int64_t ms) {
    return timeval{ms / 1000, static_cast<suseconds_t>(ms % 1000 * 1000)};
  }
  std::string where_;
  std::unique_ptr<redisContext, decltype(&redisFree)> c_;
};

}  // namespace tollgate::store::redis
