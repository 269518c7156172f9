// The Lua scripts, embedded at build time (store/lua/embed.cmake): the
// decision scripts, one per algorithm (index = algorithms::Algorithm, from
// TOLLGATE_ALGORITHMS) and "multi", then the upstream-protection scripts
// (store/lua/protect), from TOLLGATE_REDIS_AUX_SCRIPTS below.
#pragma once

#include <string_view>

#include "algorithms/limit.h"

// The upstream-protection scripts, the admin API's, the leases' and
// settle's, X(enumerator, name) per script (store/lua/protect/<name>.lua,
// store/lua/admin/<name>.lua, store/lua/lease/<name>.lua,
// store/lua/<name>.lua), in their order
// in kRedisScripts.
// store/lua/embed.cmake parses the X(...) lines: keep one per line, in this
// form.
#define TOLLGATE_REDIS_AUX_SCRIPTS(X) \
  X(kLearnedCheck, learned_check)     \
  X(kLearnedLearn, learned_learn)     \
  X(kInflightAcquire, inflight_acquire) \
  X(kInflightRelease, inflight_release) \
  X(kQueueEnter, queue_enter)         \
  X(kQueueLeave, queue_leave)         \
  X(kKeyPeek, key_peek)               \
  X(kKeyReset, key_reset)             \
  X(kBlocksPut, blocks_put)           \
  X(kBlocksDelete, blocks_delete)     \
  X(kBlocksRead, blocks_read)         \
  X(kLeaseTake, lease_take)           \
  X(kLeaseReturn, lease_return)       \
  X(kLeaseTakeFused, lease_take_fused) \
  X(kMembers, members)                \
  X(kSettle, settle)

namespace tollgate::store {

struct RedisScriptSource {
  std::string_view name;
  std::string_view body;
};
inline constexpr int kMultiWindowScript = algorithms::kAlgorithmCount;

// The upstream-protection scripts.
enum class RedisAux : int {
#define TOLLGATE_REDIS_AUX_ENUMERATOR(enumerator, name) enumerator,
  TOLLGATE_REDIS_AUX_SCRIPTS(TOLLGATE_REDIS_AUX_ENUMERATOR)
#undef TOLLGATE_REDIS_AUX_ENUMERATOR
};
#define TOLLGATE_REDIS_AUX_ONE(enumerator, name) +1
inline constexpr int kRedisAuxCount = 0 TOLLGATE_REDIS_AUX_SCRIPTS(TOLLGATE_REDIS_AUX_ONE);
#undef TOLLGATE_REDIS_AUX_ONE
// Its index in kRedisScripts.
constexpr int RedisScriptIndex(RedisAux script) {
  return kMultiWindowScript + 1 + static_cast<int>(script);
}
inline constexpr int kRedisScriptCount = kMultiWindowScript + 1 + kRedisAuxCount;
extern const RedisScriptSource kRedisScripts[kRedisScriptCount];

}  // namespace tollgate::store
