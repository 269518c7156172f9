#include "store/redis/sync_connection.h"

#include <csignal>
#include <mutex>
#include <optional>

namespace tollgate::store {
using namespace redis;

void redis::IgnoreSigpipe() {
  static std::once_flag once;
  std::call_once(once, [] { std::signal(SIGPIPE, SIG_IGN); });
}

std::optional<std::string> CheckRedis(const RedisOptions& options, bool& fatal) {
  fatal = false;
  // A cluster: its first seed that answers stands for it (every node loads
  // the scripts again when the gateway connects to it).
  const RedisAddress& a = options.nodes.empty() ? options.address : options.nodes[0];
  SyncConnection c(a, options.connect_timeout_ms);
  if (!c.Connected()) return c.ConnectError();
  const std::string& where = c.Where();
  std::string text;
  for (const Command& handshake : HandshakeCommands(a)) {
    auto r = c.Run(handshake, text);
    if (text.empty()) continue;
    fatal = r != nullptr;
    if (handshake.front() == "AUTH") {
      return fmt::format("{}: authentication failed: {}", where, text);
    }
    return fmt::format("{}: cannot select database {}: {}", where, a.db, text);
  }
  for (int i = 0; i < kRedisScriptCount; ++i) {
    auto r = c.Run(ScriptLoad(i), text);
    if (!text.empty()) {
      fatal = r != nullptr && text.rfind("NOAUTH", 0) == 0;
      return fmt::format("{}: cannot load the {} script: {}", where, kRedisScripts[i].name, text);
    }
    if (r->type != REDIS_REPLY_STRING || std::string_view(r->str, r->len) != ScriptSha(i)) {
      return fmt::format("{}: SCRIPT LOAD answered an unexpected digest", where);
    }
  }
  return std::nullopt;
}

}  // namespace tollgate::store
