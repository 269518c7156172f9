// The Lua decision scripts, embedded at build time (store/lua/embed.cmake):
// one per algorithm (index = algorithms::Algorithm) and "multi" last.
#pragma once

#include <string_view>

namespace tollgate::store {

struct RedisScriptSource {
  std::string_view name;
  std::string_view body;
};
inline constexpr int kRedisScriptCount = 7;
inline constexpr int kMultiWindowScript = 6;
extern const RedisScriptSource kRedisScripts[kRedisScriptCount];

}  // namespace tollgate::store
