// Verification of JSON Web Tokens (RFC 7519) with OpenSSL: HS256, RS256 or
// ES256, exactly the configured one (a token naming another algorithm, "none"
// included, is refused: no algorithm confusion). Checks exp and nbf with a
// leeway and extracts the user and role claims. Immutable; thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "rules/rule.h"

namespace tollgate::rules {

struct JwtClaims {
  bool valid = false;
  std::string user;
  std::string role;
  std::string problem;  // why not valid: for logs, never for clients
};

class JwtVerifier {
 public:
  // nullptr with `error` set when the key cannot be used.
  static std::unique_ptr<JwtVerifier> Create(const JwtConfig& config, std::string& error);
  ~JwtVerifier();
  JwtClaims Verify(std::string_view token, std::int64_t now_unix_ms) const;

 private:
  struct Key;
  JwtVerifier(const JwtConfig& config, std::unique_ptr<Key> key);
  bool SignatureMatches(std::string_view signing_input, const std::string& signature) const;
  JwtConfig config_;
  std::unique_ptr<Key> key_;
};

// base64url without padding (RFC 4648 §5); nullopt when malformed.
std::optional<std::string> Base64UrlDecode(std::string_view text);
std::string Base64UrlEncode(std::string_view bytes);

}  // namespace tollgate::rules
