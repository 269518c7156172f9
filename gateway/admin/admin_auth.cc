#include "gateway/admin/admin_auth.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <cctype>

namespace tollgate::gateway {
namespace {

bool SchemeIsBearer(std::string_view scheme) {
  constexpr std::string_view kBearer = "bearer";
  if (scheme.size() != kBearer.size()) return false;
  for (std::size_t i = 0; i < scheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(scheme[i])) != kBearer[i]) return false;
  }
  return true;
}

// Compares digests rather than the strings themselves, so that neither the
// length nor any prefix of the token shows in the time taken.
bool SameToken(std::string_view given, std::string_view token) {
  unsigned char a[SHA256_DIGEST_LENGTH];
  unsigned char b[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(given.data()), given.size(), a);
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), b);
  return CRYPTO_memcmp(a, b, sizeof a) == 0;
}

}  // namespace

std::string TokenFingerprint(std::string_view token) {
  static constexpr char kHex[] = "0123456789abcdef";
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest);
  std::string out;
  for (int i = 0; i < 4; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 15]);
  }
  return out;
}

AuthResult Authorize(std::string_view token, std::string_view authorization, ListenerScope scope,
                     ApiAccess access) {
  if (!token.empty()) {
    const std::size_t space = authorization.find(' ');
    if (space == std::string_view::npos || !SchemeIsBearer(authorization.substr(0, space))) {
      return AuthResult::kUnauthorized;
    }
    std::string_view given = authorization.substr(space + 1);
    while (!given.empty() && given.front() == ' ') given.remove_prefix(1);
    return SameToken(given, token) ? AuthResult::kAllowed : AuthResult::kUnauthorized;
  }
  if (scope != ListenerScope::kLoopback || access == ApiAccess::kChange) {
    return AuthResult::kForbidden;
  }
  return AuthResult::kAllowed;
}

}  // namespace tollgate::gateway
