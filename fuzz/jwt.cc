// The JWT verifier (rules/jwt.h) on arbitrary tokens, with a fixed HS256
// secret, an RS256 and an ES256 public key (throwaway keys; their private
// halves, which signed the seed corpus, were discarded). The first byte
// chooses:
//   0: HS256, 1: RS256, 2: ES256 -- the rest is the token as received;
//   3: HS256 with a token the harness signs itself: the rest is
//      header-JSON NUL payload-JSON, so that the claims (exp, nbf, sub,
//      role), which are read only after the signature matched, are fuzzed.
// Also: Base64UrlDecode(Base64UrlEncode(x)) == x.
#include "rules/jwt.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

namespace {

using namespace tollgate::rules;

#define FUZZ_CHECK(cond)  \
  do {                    \
    if (!(cond)) abort(); \
  } while (0)

constexpr std::string_view kSecret = "tollgate-fuzz-secret-0123456789abcdef";
constexpr std::int64_t kNowMs = 1'800'000'000'000;  // 2027-01-15

constexpr const char* kRsaPublicKey = R"(-----BEGIN PUBLIC KEY-----
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA3TWC8Nabo1YtwTfSqAe3
DGlgrAxqTPzBEsC8UDhR9gvZ5N1Wzt4WkHyivYFt4QpMkyi8oJeh6vx0YdkKbwvI
pKtg673uyH1biq3PeOqPh5twTBGFGyjkpbf4S3cjmgOFrx9HPCYDBs4OPVhqLBrL
EP44IEkYszKMFh6oh+5vaur/GXgfem1wgqVuQDB918JYd5IYC0gM69gzUvH/DVVN
uZ0TT781I8ICFtO/y4GwMeAtH0QkmsajEkZ04CqptakwDtUro/Db28NNSD+AYFCa
1K/aVYx6i5JWkLFqYp4sfigGBo0kYHs7D0i0aufvh57xrmtHVVACI/p6j77Wrm/X
MQIDAQAB
-----END PUBLIC KEY-----
)";
constexpr const char* kEcPublicKey = R"(-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEbWmILpxPEVHShtIGLC6Glkzyp8QC
WcaKXIhgNGGUF4gB1bi84Jv0WA9gxZvVZabZsBsx0yfsb2xz9+oRfnqLtQ==
-----END PUBLIC KEY-----
)";

std::unique_ptr<JwtVerifier> Make(JwtAlgorithm algorithm) {
  JwtConfig config;
  config.algorithm = algorithm;
  config.secret = std::string(kSecret);
  if (algorithm == JwtAlgorithm::kRs256) config.public_key_pem = kRsaPublicKey;
  if (algorithm == JwtAlgorithm::kEs256) config.public_key_pem = kEcPublicKey;
  std::string error;
  auto verifier = JwtVerifier::Create(config, error);
  if (verifier == nullptr) abort();  // the fixed keys must load
  return verifier;
}

std::string Hs256(std::string_view input) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), kSecret.data(), static_cast<int>(kSecret.size()),
       reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac, &len);
  return std::string(reinterpret_cast<const char*>(mac), len);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::unique_ptr<JwtVerifier> hs = Make(JwtAlgorithm::kHs256);
  static const std::unique_ptr<JwtVerifier> rs = Make(JwtAlgorithm::kRs256);
  static const std::unique_ptr<JwtVerifier> es = Make(JwtAlgorithm::kEs256);
  if (size == 0) return -1;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);

  const auto decoded = Base64UrlDecode(Base64UrlEncode(rest));
  FUZZ_CHECK(decoded && *decoded == rest);

  JwtClaims claims;
  switch (data[0] % 4) {
    case 0:
      claims = hs->Verify(rest, kNowMs);
      break;
    case 1:
      claims = rs->Verify(rest, kNowMs);
      break;
    case 2:
      claims = es->Verify(rest, kNowMs);
      break;
    case 3: {
      const std::size_t nul = rest.find('\0');
      if (nul == std::string_view::npos) return -1;
      std::string token =
          Base64UrlEncode(rest.substr(0, nul)) + '.' + Base64UrlEncode(rest.substr(nul + 1));
      token += '.' + Base64UrlEncode(Hs256(token));
      claims = hs->Verify(token, kNowMs);
      break;
    }
  }
  FUZZ_CHECK(claims.valid == claims.problem.empty());
  FUZZ_CHECK(claims.valid || (claims.user.empty() && claims.role.empty()));
  return 0;
}
