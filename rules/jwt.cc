#include "rules/jwt.h"

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

namespace tollgate::rules {

struct JwtVerifier::Key {
  EVP_PKEY* pkey = nullptr;
  ~Key() { EVP_PKEY_free(pkey); }
};

namespace {

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::string_view AlgorithmName(JwtAlgorithm a) {
  switch (a) {
    case JwtAlgorithm::kHs256:
      return "HS256";
    case JwtAlgorithm::kRs256:
      return "RS256";
    case JwtAlgorithm::kEs256:
      return "ES256";
  }
  return "";
}

std::optional<boost::json::object> ParseObject(std::string_view text) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  if (ec || !v.is_object()) return std::nullopt;
  return v.as_object();
}

// A claim as text: strings as they are, integers printed; arrays give their
// first element (a role list names the primary role first).
std::string ClaimText(const boost::json::value& v) {
  if (v.is_string()) return std::string(v.as_string());
  if (v.is_int64()) return std::to_string(v.as_int64());
  if (v.is_uint64()) return std::to_string(v.as_uint64());
  if (v.is_array() && !v.as_array().empty()) return ClaimText(v.as_array().front());
  return "";
}

std::optional<double> NumericClaim(const boost::json::object& o, std::string_view name) {
  auto it = o.find(name);
  if (it == o.end()) return std::nullopt;
  if (it->value().is_number()) return it->value().to_number<double>();
  return -1;  // present but not a number: treated as already expired / not yet valid
}

}  // namespace

std::optional<std::string> Base64UrlDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size() * 3 / 4);
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    const std::size_t v = kAlphabet.find(c);
    if (v == std::string_view::npos) return std::nullopt;
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  if (bits >= 6) return std::nullopt;  // a dangling character
  return out;
}

std::string Base64UrlEncode(std::string_view bytes) {
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : bytes) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kAlphabet[(acc >> bits) & 0x3f]);
    }
  }
  if (bits > 0) out.push_back(kAlphabet[(acc << (6 - bits)) & 0x3f]);
  return out;
}

std::unique_ptr<JwtVerifier> JwtVerifier::Create(const JwtConfig& config, std::string& error) {
  auto key = std::make_unique<Key>();
  if (config.algorithm == JwtAlgorithm::kHs256) {
    if (config.secret.size() < 32) {
      error = "the HS256 secret must be at least 32 bytes (RFC 7518 §3.2)";
      return nullptr;
    }
  } else {
    BIO* bio = BIO_new_mem_buf(config.public_key_pem.data(),
                               static_cast<int>(config.public_key_pem.size()));
    key->pkey = PEM_read_bio_PUBKEY(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    if (key->pkey == nullptr) {
      error = "the public key file holds no PEM public key";
      return nullptr;
    }
    const int type = EVP_PKEY_get_base_id(key->pkey);
    if (config.algorithm == JwtAlgorithm::kRs256 && type != EVP_PKEY_RSA) {
      error = "RS256 needs an RSA public key";
      return nullptr;
    }
    if (config.algorithm == JwtAlgorithm::kEs256 &&
        (type != EVP_PKEY_EC || EVP_PKEY_get_bits(key->pkey) != 256)) {
      error = "ES256 needs a P-256 EC public key";
      return nullptr;
    }
  }
  return std::unique_ptr<JwtVerifier>(new JwtVerifier(config, std::move(key)));
}

JwtVerifier::JwtVerifier(const JwtConfig& config, std::unique_ptr<Key> key)
    : config_(config), key_(std::move(key)) {}
JwtVerifier::~JwtVerifier() = default;

bool JwtVerifier::SignatureMatches(std::string_view input, const std::string& signature) const {
  if (config_.algorithm == JwtAlgorithm::kHs256) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int mac_len = 0;
    HMAC(EVP_sha256(), config_.secret.data(), static_cast<int>(config_.secret.size()),
         reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac, &mac_len);
    return signature.size() == mac_len && CRYPTO_memcmp(mac, signature.data(), mac_len) == 0;
  }
  std::string der;
  const std::string* sig = &signature;
  if (config_.algorithm == JwtAlgorithm::kEs256) {
    // JWS carries r || s (32 bytes each); OpenSSL verifies DER.
    if (signature.size() != 64) return false;
    ECDSA_SIG* ecdsa = ECDSA_SIG_new();
    BIGNUM* r = BN_bin2bn(reinterpret_cast<const unsigned char*>(signature.data()), 32, nullptr);
    BIGNUM* s =
        BN_bin2bn(reinterpret_cast<const unsigned char*>(signature.data()) + 32, 32, nullptr);
    ECDSA_SIG_set0(ecdsa, r, s);
    unsigned char* out = nullptr;
    const int len = i2d_ECDSA_SIG(ecdsa, &out);
    ECDSA_SIG_free(ecdsa);
    if (len <= 0) return false;
    der.assign(reinterpret_cast<char*>(out), static_cast<std::size_t>(len));
    OPENSSL_free(out);
    sig = &der;
  }
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  bool ok =
      EVP_DigestVerifyInit(ctx, nullptr, EVP_sha256(), nullptr, key_->pkey) == 1 &&
      EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(sig->data()), sig->size(),
                       reinterpret_cast<const unsigned char*>(input.data()), input.size()) == 1;
  EVP_MD_CTX_free(ctx);
  return ok;
}

JwtClaims JwtVerifier::Verify(std::string_view token, std::int64_t now_unix_ms) const {
  JwtClaims claims;
  const std::size_t dot1 = token.find('.');
  const std::size_t dot2 = dot1 == std::string_view::npos ? dot1 : token.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos || token.find('.', dot2 + 1) != std::string_view::npos) {
    claims.problem = "not a compact JWS";
    return claims;
  }
  auto header_json = Base64UrlDecode(token.substr(0, dot1));
  auto payload_json = Base64UrlDecode(token.substr(dot1 + 1, dot2 - dot1 - 1));
  auto signature = Base64UrlDecode(token.substr(dot2 + 1));
  if (!header_json || !payload_json || !signature) {
    claims.problem = "malformed base64url";
    return claims;
  }
  // Only the header is read before the signature is checked.
  auto header = ParseObject(*header_json);
  if (!header) {
    claims.problem = "header is not a JSON object";
    return claims;
  }
  auto alg = header->find("alg");
  if (alg == header->end() || !alg->value().is_string() ||
      alg->value().as_string() != AlgorithmName(config_.algorithm)) {
    claims.problem = "unexpected alg";
    return claims;
  }
  if (!SignatureMatches(token.substr(0, dot2), *signature)) {
    claims.problem = "bad signature";
    return claims;
  }
  auto payload = ParseObject(*payload_json);
  if (!payload) {
    claims.problem = "payload is not a JSON object";
    return claims;
  }
  if (auto exp = NumericClaim(*payload, "exp")) {
    if (static_cast<double>(now_unix_ms - config_.leeway_ms) >= *exp * 1000.0) {
      claims.problem = "expired";
      return claims;
    }
  }
  if (auto nbf = NumericClaim(*payload, "nbf")) {
    if (*nbf < 0 || static_cast<double>(now_unix_ms + config_.leeway_ms) < *nbf * 1000.0) {
      claims.problem = "not yet valid";
      return claims;
    }
  }
  if (auto it = payload->find(config_.user_claim); it != payload->end()) {
    claims.user = ClaimText(it->value());
  }
  if (auto it = payload->find(config_.role_claim); it != payload->end()) {
    claims.role = ClaimText(it->value());
  }
  claims.valid = true;
  return claims;
}

}  // namespace tollgate::rules
