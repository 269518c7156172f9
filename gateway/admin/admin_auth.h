// Who may call the admin API (/api/ on the admin listener;
// docs/admin-api.md). With a token configured ([admin] token_env / token_file), every
// call needs "Authorization: Bearer <token>", compared in constant time.
// Without one, the API answers only on a loopback admin address, and only
// calls that change nothing. Pure; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tollgate::gateway {

// What a call does: reads state, or changes it (a reset, a block, ...).
enum class ApiAccess : std::uint8_t { kRead, kChange };
// Where the admin listener is bound: only this machine can reach it, or
// others may.
enum class ListenerScope : std::uint8_t { kLoopback, kReachable };

enum class AuthResult : std::uint8_t {
  kAllowed,
  kUnauthorized,  // 401: a token is configured and the call does not carry it
  kForbidden,     // 403: no token is configured and the call needs one
};

// `token`: the configured token, empty for none. `authorization`: the
// call's Authorization field, empty when absent.
AuthResult Authorize(std::string_view token, std::string_view authorization, ListenerScope scope,
                     ApiAccess access);

// Names a token in the audit log without showing it: the first 8 hex
// digits of its SHA-256.
std::string TokenFingerprint(std::string_view token);

}  // namespace tollgate::gateway
