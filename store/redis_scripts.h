// The Lua scripts, embedded at build time (store/lua/embed.cmake): the
// decision scripts, one per algorithm (index = algorithms::Algorithm) and
// "multi", then the upstream-protection scripts (store/lua/protect).
#pragma once

#include <string_view>

namespace tollgate::store {

struct RedisScriptSource {
  std::string_view name;
  std::string_view body;
};
inline constexpr int kMultiWindowScript = 6;

// The upstream-protection scripts, by index in kRedisScripts.
enum class RedisAux : int {
  kLearnedCheck = 7,
  kLearnedLearn,
  kInflightAcquire,
  kInflightRelease,
  kQueueEnter,
  kQueueLeave,
};
inline constexpr int kRedisScriptCount = 13;
extern const RedisScriptSource kRedisScripts[kRedisScriptCount];

}  // namespace tollgate::store
