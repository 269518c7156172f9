// Client IP through trusted proxies, identity headers, JWT verification,
// rule matching and key building.
#include "rules/identity.h"

#include <gtest/gtest.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

#include <map>

#include "rules/config.h"
#include "rules/jwt.h"
#include "rules/rule_set.h"

namespace tollgate::rules {
namespace {

constexpr std::int64_t kNowMs = 1'800'000'000'000;  // 2027-01-15

class Headers final : public HeaderLookup {
 public:
  std::multimap<std::string, std::string> values;
  std::string_view Get(std::string_view name) const override {
    auto it = values.find(std::string(name));
    return it == values.end() ? std::string_view() : std::string_view(it->second);
  }
  std::string GetJoined(std::string_view name) const override {
    std::string out;
    auto [a, b] = values.equal_range(std::string(name));
    for (auto it = a; it != b; ++it) out += (out.empty() ? "" : ", ") + it->second;
    return out;
  }
};

IpAddress Ip(std::string_view s) { return *IpAddress::Parse(s); }

// BuildKey's key for the request, or "(none)" when the rule does not apply.
std::string KeyOf(const RuleConfig& rule, const RequestFacts& request, const Identity& id) {
  std::string key = "(what the string held before)";
  return BuildKey(rule, request, id, key) ? key : "(none)";
}

IdentityConfig TrustLocal() {
  IdentityConfig c;
  c.trusted_proxies = {*Cidr::Parse("127.0.0.1/32"), *Cidr::Parse("10.0.0.0/8")};
  c.user_header = "X-User-Id";
  c.role_header = "X-User-Role";
  return c;
}

Identity ResolveWith(const IdentityConfig& config, std::string_view peer, const Headers& h,
                     std::int64_t now_ms = kNowMs) {
  store::ManualClock clock(now_ms);
  std::string error;
  auto resolver = IdentityResolver::Create(config, clock, error);
  EXPECT_NE(resolver, nullptr) << error;
  RequestFacts facts{"GET", "/", "h", "r", Ip(peer), &h};
  return resolver->Resolve(facts);
}

TEST(Cidrs, V4AndV6) {
  EXPECT_TRUE(Cidr::Parse("10.0.0.0/8")->Contains(Ip("10.200.3.4")));
  EXPECT_FALSE(Cidr::Parse("10.0.0.0/8")->Contains(Ip("11.0.0.1")));
  EXPECT_TRUE(Cidr::Parse("192.168.1.7")->Contains(Ip("192.168.1.7")));
  EXPECT_TRUE(Cidr::Parse("2001:db8::/32")->Contains(Ip("2001:db8:1::5")));
  EXPECT_FALSE(Cidr::Parse("2001:db8::/32")->Contains(Ip("2001:db9::5")));
  EXPECT_FALSE(Cidr::Parse("::/0")->Contains(Ip("1.2.3.4")) && false);
  EXPECT_FALSE(Cidr::Parse("10.0.0.0/33"));
  EXPECT_FALSE(Cidr::Parse("not-an-ip/8"));
  EXPECT_EQ(Ip("::ffff:1.2.3.4"), Ip("1.2.3.4"));
  EXPECT_EQ(Cidr::Parse("0.0.0.0/0")->ToString(), "0.0.0.0/0");
  EXPECT_EQ(Cidr::Parse("2001:db8::/32")->ToString(), "2001:db8::/32");
  EXPECT_EQ(Cidr::Parse("192.168.1.7")->ToString(), "192.168.1.7/32");
}

// A network with host bits set is a typo more often than not: masked,
// "127.0.0.6/0" would be everyone.
TEST(Cidrs, HostBitsAreRefusedNamingTheNetwork) {
  std::string problem;
  EXPECT_FALSE(Cidr::Parse("127.0.0.6/0", problem));
  EXPECT_EQ(problem,
            R"("127.0.0.6/0" has host bits set: the network of that prefix is "0.0.0.0/0"; )"
            "write that, or the address alone for one host");
  EXPECT_FALSE(Cidr::Parse("10.1.2.3/8", problem));
  EXPECT_NE(problem.find(R"("10.0.0.0/8")"), std::string::npos) << problem;
  EXPECT_FALSE(Cidr::Parse("2001:db8::1/64", problem));
  EXPECT_NE(problem.find(R"("2001:db8::/64")"), std::string::npos) << problem;
  EXPECT_FALSE(Cidr::Parse("10.0.0.0/33", problem));
  EXPECT_EQ(problem, R"("10.0.0.0/33" is not an IP address or network such as )"
                     R"("203.0.113.0/24" or "2001:db8::/32")");
  EXPECT_TRUE(Cidr::Parse("10.1.2.3/32", problem));
  EXPECT_TRUE(Cidr::Parse("2001:db8::/64", problem));
}

TEST(ClientIp, AnUntrustedPeerCannotChooseItsIp) {
  Headers h;
  h.values.insert({"X-Forwarded-For", "1.2.3.4"});
  EXPECT_EQ(ResolveWith(TrustLocal(), "203.0.113.9", h).client_ip, Ip("203.0.113.9"));
}

TEST(ClientIp, TrustedChainGivesTheRightmostUntrustedHop) {
  Headers h;
  // client spoofs 6.6.6.6; the real client 198.51.100.2; then two of our proxies.
  h.values.insert({"X-Forwarded-For", "6.6.6.6, 198.51.100.2"});
  h.values.insert({"X-Forwarded-For", "10.1.1.1"});
  EXPECT_EQ(ResolveWith(TrustLocal(), "127.0.0.1", h).client_ip, Ip("198.51.100.2"));
  Headers only_proxies;
  only_proxies.values.insert({"X-Forwarded-For", "10.0.0.5, 10.0.0.6"});
  EXPECT_EQ(ResolveWith(TrustLocal(), "127.0.0.1", only_proxies).client_ip, Ip("10.0.0.5"));
  Headers none;
  EXPECT_EQ(ResolveWith(TrustLocal(), "10.9.9.9", none).client_ip, Ip("10.9.9.9"));
  // Empty list elements do not count (RFC 9110 §5.6.1).
  Headers empty_elements;
  empty_elements.values.insert({"X-Forwarded-For", "198.51.100.2, , 10.0.0.6,"});
  EXPECT_EQ(ResolveWith(TrustLocal(), "127.0.0.1", empty_elements).client_ip, Ip("198.51.100.2"));
}

// Some proxies write the client's port too (Azure's gateways do): the entry
// is still that address (one of ours with a port is still one of ours).
TEST(ClientIp, AnEntryWithAPortIsItsAddress) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"198.51.100.2:5678", "198.51.100.2"},
      {"[2001:db8::7]:443", "2001:db8::7"},
      {"[2001:db8::7]", "2001:db8::7"},
      {"10.0.0.6:80", "6.6.6.6"}};
  for (const auto& [entry, address] : cases) {
    Headers h;
    h.values.insert({"X-Forwarded-For", "6.6.6.6, " + entry});
    const Identity id = ResolveWith(TrustLocal(), "127.0.0.1", h);
    EXPECT_EQ(id.client_ip, Ip(address)) << entry;
    EXPECT_EQ(id.unidentified_client, "") << entry;
  }
}

// An entry that is no address ("unknown", garbage, a port without its
// brackets) ends the walk, and the client is that text: never the proxy,
// whose own requests have a key of their own.
TEST(ClientIp, AnEntryThatIsNoAddressNeverSharesTheProxysKey) {
  LoadResult loaded = LoadConfigText(std::string(R"(
[[listeners]]
address = "127.0.0.1:0"
[[upstreams]]
name = "api"
servers = ["127.0.0.1:9"]
[[routes]]
upstream = "api"
[[rules]]
name = "per-ip"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
[[rules]]
name = "inner"
match = { ip = ["0.0.0.0/0", "::/0"] }
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
)"),
                                     "t.toml");
  ASSERT_TRUE(loaded.config) << loaded.errors[0].ToString();
  const RuleConfig& rule = loaded.config->rules[0];
  const RuleMatch& everyone = loaded.config->rules[1].match;
  const auto resolve = [](const std::string& xff, std::string peer = "127.0.0.1") {
    Headers h;
    if (!xff.empty()) h.values.insert({"X-Forwarded-For", xff});
    return ResolveWith(TrustLocal(), peer, h);
  };
  const auto key_of = [&](const Identity& id) {
    Headers h;
    const RequestFacts facts{"GET", "/", "h", "main", id.client_ip, &h};
    return KeyOf(rule, facts, id);
  };
  const std::string proxy_key = key_of(resolve(""));
  const std::string inner_proxy_key = key_of(resolve("", "10.0.0.6"));
  for (const std::string xff : {"unknown", "198.51.100.2, nonsense, 10.0.0.6", "1.2.3.4:5678:9",
                                "1.2.3.4:99999", "[2001:db8::1]:x", "_hidden"}) {
    const Identity id = resolve(xff);
    EXPECT_NE(id.unidentified_client, "") << xff;
    const std::string key = key_of(id);
    EXPECT_NE(key, proxy_key) << xff;
    EXPECT_NE(key, inner_proxy_key) << xff;
    EXPECT_NE(key, "(none)") << xff;  // still limited
    Headers h;
    const RequestFacts facts{"GET", "/", "h", "main", id.client_ip, &h};
    EXPECT_FALSE(Matches(everyone, facts, id)) << xff << ": in no CIDR";
    EXPECT_EQ(DisplayKey(rule, key).substr(0, 16), "ip=unidentified#") << xff;
  }
  EXPECT_EQ(resolve("198.51.100.2, nonsense, 10.0.0.6").unidentified_client, "nonsense");
  // One text, one key; another text, another key.
  EXPECT_EQ(key_of(resolve("unknown")), key_of(resolve("unknown, 10.0.0.6")));
  EXPECT_NE(key_of(resolve("unknown")), key_of(resolve("nonsense")));
  // From a peer that is not trusted the header is not read at all.
  EXPECT_EQ(key_of(resolve("unknown", "203.0.113.9")), key_of(resolve("", "203.0.113.9")));
}

TEST(IdentityHeaders, HonouredOnlyFromTrustedProxies) {
  Headers h;
  h.values.insert({"X-User-Id", "alice"});
  h.values.insert({"X-User-Role", "admin"});
  Identity trusted = ResolveWith(TrustLocal(), "127.0.0.1", h);
  EXPECT_EQ(trusted.user, "alice");
  EXPECT_EQ(trusted.role, "admin");
  Identity stranger = ResolveWith(TrustLocal(), "203.0.113.9", h);
  EXPECT_TRUE(stranger.anonymous());
  EXPECT_EQ(stranger.role, "");
  EXPECT_FALSE(stranger.peer_trusted);
}

// CGI servers read X_User_Id as X-User-Id; tollgate reads only the
// configured name (in any case), and only from trusted proxies.
TEST(IdentityHeaders, OtherSpellingsAreNeverRead) {
  Headers h;
  h.values.insert({"X_User_Id", "mallory"});
  h.values.insert({"x_user-role", "admin"});
  h.values.insert({"X-User_Role", "admin"});
  for (const char* peer : {"203.0.113.9", "127.0.0.1"}) {
    const Identity id = ResolveWith(TrustLocal(), peer, h);
    EXPECT_TRUE(id.anonymous()) << peer;
    EXPECT_EQ(id.role, "") << peer;
  }
}

// ---- JWT -----------------------------------------------------------------

const std::string kSecret = "0123456789abcdef0123456789abcdef-test-secret";

std::string Sign(std::string_view header_json, std::string_view payload_json,
                 std::string_view secret) {
  const std::string input = Base64UrlEncode(header_json) + "." + Base64UrlEncode(payload_json);
  unsigned char mac[32];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac, &len);
  return input + "." + Base64UrlEncode(std::string_view(reinterpret_cast<char*>(mac), len));
}

struct KeyPair {
  EVP_PKEY* key = nullptr;
  std::string public_pem;
  ~KeyPair() { EVP_PKEY_free(key); }
};

std::unique_ptr<KeyPair> Generate(bool rsa) {
  auto kp = std::make_unique<KeyPair>();
  kp->key = rsa ? EVP_RSA_gen(2048) : EVP_EC_gen("P-256");
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PUBKEY(bio, kp->key);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  kp->public_pem.assign(data, static_cast<std::size_t>(n));
  BIO_free(bio);
  return kp;
}

std::string SignAsymmetric(const KeyPair& kp, bool es256, std::string_view payload_json) {
  const std::string header =
      es256 ? R"({"alg":"ES256","typ":"JWT"})" : R"({"alg":"RS256","typ":"JWT"})";
  const std::string input = Base64UrlEncode(header) + "." + Base64UrlEncode(payload_json);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestSignInit(ctx, nullptr, EVP_sha256(), nullptr, kp.key);
  std::size_t len = 0;
  EVP_DigestSign(ctx, nullptr, &len, reinterpret_cast<const unsigned char*>(input.data()),
                 input.size());
  std::string sig(len, '\0');
  EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len,
                 reinterpret_cast<const unsigned char*>(input.data()), input.size());
  sig.resize(len);
  EVP_MD_CTX_free(ctx);
  if (es256) {
    // DER -> r || s, as JWS wants.
    const unsigned char* p = reinterpret_cast<const unsigned char*>(sig.data());
    ECDSA_SIG* ecdsa = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(sig.size()));
    std::string raw(64, '\0');
    BN_bn2binpad(ECDSA_SIG_get0_r(ecdsa), reinterpret_cast<unsigned char*>(raw.data()), 32);
    BN_bn2binpad(ECDSA_SIG_get0_s(ecdsa), reinterpret_cast<unsigned char*>(raw.data()) + 32, 32);
    ECDSA_SIG_free(ecdsa);
    sig = raw;
  }
  return input + "." + Base64UrlEncode(sig);
}

std::unique_ptr<JwtVerifier> Verifier(JwtAlgorithm a, const std::string& key) {
  JwtConfig c;
  c.algorithm = a;
  if (a == JwtAlgorithm::kHs256) {
    c.secret = key;
  } else {
    c.public_key_pem = key;
  }
  std::string error;
  auto v = JwtVerifier::Create(c, error);
  EXPECT_NE(v, nullptr) << error;
  return v;
}

constexpr const char* kHs256Header = R"({"alg":"HS256","typ":"JWT"})";
const std::string kPayload =
    R"({"sub":"alice","role":"premium","exp":1800000100,"nbf":1799999000})";

TEST(Jwt, Hs256ValidTokenGivesUserAndRole) {
  auto v = Verifier(JwtAlgorithm::kHs256, kSecret);
  JwtClaims c = v->Verify(Sign(kHs256Header, kPayload, kSecret), kNowMs);
  EXPECT_TRUE(c.valid) << c.problem;
  EXPECT_EQ(c.user, "alice");
  EXPECT_EQ(c.role, "premium");
}

TEST(Jwt, ForgedExpiredEarlyAndMalformedAreRefused) {
  auto v = Verifier(JwtAlgorithm::kHs256, kSecret);
  const std::string good = Sign(kHs256Header, kPayload, kSecret);
  std::string forged = good;
  forged[good.find('.') + 3] ^= 1;  // payload changed after signing
  EXPECT_EQ(v->Verify(forged, kNowMs).problem, "bad signature");
  EXPECT_EQ(v->Verify(Sign(kHs256Header, kPayload, kSecret + "x"), kNowMs).problem,
            "bad signature");
  // exp 1800000100 s: valid until then plus the 30 s leeway.
  EXPECT_TRUE(v->Verify(good, 1'800'000'129'000).valid);
  EXPECT_EQ(v->Verify(good, 1'800'000'130'000).problem, "expired");
  // nbf 1799999000 s, with leeway.
  EXPECT_TRUE(v->Verify(good, 1'799'998'970'000).valid);
  EXPECT_EQ(v->Verify(good, 1'799'998'969'000).problem, "not yet valid");
  EXPECT_FALSE(v->Verify("abc", kNowMs).valid);
  EXPECT_FALSE(v->Verify("a.b.c.d", kNowMs).valid);
  EXPECT_FALSE(v->Verify("!!.??.**", kNowMs).valid);
}

TEST(Jwt, AlgNoneAndOtherAlgorithmsAreRefused) {
  auto v = Verifier(JwtAlgorithm::kHs256, kSecret);
  const std::string none =
      Base64UrlEncode(R"({"alg":"none"})") + "." + Base64UrlEncode(kPayload) + ".";
  EXPECT_EQ(v->Verify(none, kNowMs).problem, "unexpected alg");
  EXPECT_EQ(v->Verify(Sign(R"({"alg":"HS512"})", kPayload, kSecret), kNowMs).problem,
            "unexpected alg");
}

TEST(Jwt, Rs256AndEs256) {
  auto rsa = Generate(true);
  auto ec = Generate(false);
  auto rs = Verifier(JwtAlgorithm::kRs256, rsa->public_pem);
  auto es = Verifier(JwtAlgorithm::kEs256, ec->public_pem);
  EXPECT_TRUE(rs->Verify(SignAsymmetric(*rsa, false, kPayload), kNowMs).valid);
  EXPECT_TRUE(es->Verify(SignAsymmetric(*ec, true, kPayload), kNowMs).valid);
  // Wrong key.
  auto other = Generate(true);
  EXPECT_EQ(rs->Verify(SignAsymmetric(*other, false, kPayload), kNowMs).problem, "bad signature");
  // Algorithm confusion: an HS256 token keyed with the RSA public key.
  EXPECT_EQ(rs->Verify(Sign(kHs256Header, kPayload, rsa->public_pem), kNowMs).problem,
            "unexpected alg");
  // A key of the wrong type is refused at startup.
  JwtConfig wrong;
  wrong.algorithm = JwtAlgorithm::kEs256;
  wrong.public_key_pem = rsa->public_pem;
  std::string error;
  EXPECT_EQ(JwtVerifier::Create(wrong, error), nullptr);
  EXPECT_EQ(error, "ES256 needs a P-256 EC public key");
}

TEST(Jwt, InvalidTokenMakesTheRequestAnonymous) {
  IdentityConfig config = TrustLocal();
  config.jwt = JwtConfig{};
  config.jwt->secret = kSecret;
  Headers h;
  h.values.insert({"Authorization",
                   "Bearer " + Sign(kHs256Header, kPayload, "wrong-secret-wrong-secret-wrong!!")});
  h.values.insert({"X-User-Id", "mallory"});  // a token was sent: headers do not count
  Identity id = ResolveWith(config, "127.0.0.1", h);
  EXPECT_EQ(id.token, TokenState::kInvalid);
  EXPECT_TRUE(id.anonymous());
  Headers good;
  good.values.insert({"Authorization", "Bearer " + Sign(kHs256Header, kPayload, kSecret)});
  Identity ok = ResolveWith(config, "203.0.113.1", good);
  EXPECT_EQ(ok.token, TokenState::kValid);
  EXPECT_EQ(ok.user, "alice");
}

// RFC 9110 §11.1: the scheme is case-insensitive.
TEST(Jwt, TheBearerSchemeIsCaseInsensitive) {
  IdentityConfig config = TrustLocal();
  config.jwt = JwtConfig{};
  config.jwt->secret = kSecret;
  const std::string token = Sign(kHs256Header, kPayload, kSecret);
  for (const char* scheme : {"Bearer ", "bearer ", "BEARER ", "bEaReR ", "Bearer   "}) {
    Headers h;
    h.values.insert({"Authorization", scheme + token});
    const Identity id = ResolveWith(config, "203.0.113.1", h);
    EXPECT_EQ(id.token, TokenState::kValid) << scheme;
    EXPECT_EQ(id.user, "alice") << scheme;
  }
  for (const char* other : {"Basic ", "Bearerx ", "Bearer"}) {
    Headers h;
    h.values.insert({"Authorization", other + token});
    EXPECT_EQ(ResolveWith(config, "203.0.113.1", h).token, TokenState::kNone) << other;
  }
}

// ---- matching and keys -----------------------------------------------------

// The parts of a configuration that the rules below need around them.
constexpr const char* kSkeleton = R"(
[[listeners]]
address = "127.0.0.1:0"
[[upstreams]]
name = "api"
servers = ["127.0.0.1:9"]
[[routes]]
upstream = "api")";

TEST(Cidrs, ConfigListsRefuseHostBitsWithAPosition) {
  LoadResult loaded = LoadConfigText(std::string(kSkeleton) + R"(
[identity]
trusted_proxies = ["127.0.0.1/32", "127.0.0.6/0"]
[[rules]]
name = "inner"
match = { ip = "10.1.2.3/8" }
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
)",
                                     "t.toml");
  ASSERT_EQ(loaded.errors.size(), 2u);
  EXPECT_EQ(loaded.errors[0].ToString(),
            R"(t.toml:10:36: "trusted_proxies" must list CIDRs such as "10.0.0.0/8" or "::1/128": )"
            R"("127.0.0.6/0" has host bits set: the network of that prefix is "0.0.0.0/0"; )"
            "write that, or the address alone for one host");
  EXPECT_EQ(loaded.errors[1].ToString().substr(0, 15), "t.toml:13:16: \"");
}

TEST(Rules, MatchersAndKeys) {
  LoadResult loaded = LoadConfigText(std::string(kSkeleton) + R"(
[[rules]]
name = "r"
match = { path_prefix = "/api", methods = ["get", "POST"], role = ["user"], ip = ["10.0.0.0/8"], host = "API.example.com", header = { "X-Tenant" = "a" }, anonymous = false }
key = ["user", "route", "header:X-Tenant"]
algorithm = "fixed_window"
limit = 1
window = "1s"
)",
                                     "t.toml");
  ASSERT_TRUE(loaded.config) << loaded.errors[0].ToString();
  const RuleConfig& rule = loaded.config->rules[0];
  Headers h;
  h.values.insert({"X-Tenant", "a"});
  RequestFacts facts{"GET", "/api/x", "api.example.com:443", "main", Ip("10.1.2.3"), &h};
  Identity id;
  id.client_ip = Ip("10.1.2.3");
  id.user = "alice";
  id.role = "user";
  EXPECT_TRUE(Matches(rule.match, facts, id));
  EXPECT_EQ(KeyOf(rule, facts, id),
            "r\x1f"
            "alice\x1f"
            "main\x1f"
            "a");
  auto differs = [&](auto change) {
    RequestFacts f = facts;
    Identity i = id;
    Headers other = h;
    f.headers = &other;
    change(f, i, other);
    return !Matches(rule.match, f, i);
  };
  EXPECT_TRUE(differs([](RequestFacts& f, Identity&, Headers&) { f.path = "/other"; }));
  EXPECT_TRUE(differs([](RequestFacts& f, Identity&, Headers&) { f.method = "DELETE"; }));
  EXPECT_TRUE(differs([](RequestFacts&, Identity& i, Headers&) { i.role = "admin"; }));
  EXPECT_TRUE(differs([](RequestFacts&, Identity& i, Headers&) { i.client_ip = Ip("11.0.0.1"); }));
  EXPECT_TRUE(differs([](RequestFacts& f, Identity&, Headers&) { f.host = "other.example.com"; }));
  EXPECT_TRUE(differs([](RequestFacts&, Identity&, Headers& o) { o.values.clear(); }));
  EXPECT_TRUE(differs([](RequestFacts&, Identity& i, Headers&) { i.user.clear(); }));
  // A long value is hashed: keys stay bounded whatever a client sends.
  Identity long_user = id;
  long_user.user = std::string(5000, 'u');
  const std::string key = KeyOf(rule, facts, long_user);
  EXPECT_LT(key.size(), 120u);
  EXPECT_NE(key.find("\x1f#"), std::string::npos);
  // No user: the rule cannot build its key and does not apply.
  Identity anonymous = id;
  anonymous.user.clear();
  EXPECT_EQ(KeyOf(rule, facts, anonymous), "(none)");
  // For people: named parts, the header value (maybe a credential) fingerprinted.
  const std::string shown = DisplayKey(rule, KeyOf(rule, facts, id));
  EXPECT_EQ(shown.substr(0, 39), "user=alice route=main header:X-Tenant=#");
  EXPECT_EQ(shown.size(), 39u + 8u) << shown;
}

TEST(Rules, NotExcludesRequestsThatMeetAllItsConditions) {
  LoadResult loaded = LoadConfigText(std::string(kSkeleton) + R"(
[[rules]]
name = "others"
match = { anonymous = false, not = { role = ["premium", "admin"] } }
key = "user"
algorithm = "fixed_window"
limit = 1
window = "1s"
[[rules]]
name = "both"
match = { not = { role = "premium", path_prefix = "/public" } }
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
)",
                                     "t.toml");
  ASSERT_TRUE(loaded.config) << loaded.errors[0].ToString();
  const RuleMatch& others = loaded.config->rules[0].match;
  const RuleMatch& both = loaded.config->rules[1].match;
  Headers h;
  const RequestFacts api{"GET", "/api/x", "h", "main", Ip("10.1.2.3"), &h};
  const RequestFacts pub{"GET", "/public/x", "h", "main", Ip("10.1.2.3"), &h};
  auto as = [](std::string user, std::string role) {
    Identity id;
    id.user = std::move(user);
    id.role = std::move(role);
    return id;
  };
  // Every user but premium and admin ones, a user without any role included.
  EXPECT_TRUE(Matches(others, api, as("u", "user")));
  EXPECT_TRUE(Matches(others, api, as("u", "guest")));
  EXPECT_TRUE(Matches(others, api, as("u", "")));
  EXPECT_FALSE(Matches(others, api, as("u", "premium")));
  EXPECT_FALSE(Matches(others, api, as("u", "admin")));
  EXPECT_FALSE(Matches(others, api, as("", "")));  // anonymous = false still holds
  // A request is excluded only when it meets every condition of `not`.
  EXPECT_FALSE(Matches(both, pub, as("u", "premium")));
  EXPECT_TRUE(Matches(both, api, as("u", "premium")));
  EXPECT_TRUE(Matches(both, pub, as("u", "user")));
}

// One Evaluation serves a session's requests one after the other: each
// sees exactly its own rules and keys, whatever the one before left.
TEST(Rules, AnEvaluationReusedForOtherRequestsKeepsNothingOfThem) {
  LoadResult loaded = LoadConfigText(std::string(kSkeleton) + R"(
[[rules]]
name = "admins"
match = { role = "admin" }
exempt = true
[[rules]]
name = "per-user"
key = "user"
algorithm = "fixed_window"
limit = 1
window = "1s"
[[rules]]
name = "per-ip"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
[[rules]]
name = "two-at-once"
key = "user"
max_inflight = 2
)",
                                     "t.toml");
  ASSERT_TRUE(loaded.config) << loaded.errors[0].ToString();
  const RuleSet rules(loaded.config->rules);
  Headers h;
  Evaluation evaluation;
  // "rule:key" of every hit, rate rules first, then "|" and the concurrency rules.
  const auto evaluate = [&](std::string_view user, std::string_view role) {
    Identity id;
    id.client_ip = Ip("192.0.2.7");
    id.user = std::string(user);
    id.role = std::string(role);
    const RequestFacts facts{"GET", "/", "h", "main", id.client_ip, &h};
    rules.Evaluate(facts, id, evaluation);
    std::string out = evaluation.exempt != nullptr ? evaluation.exempt->name + " " : "";
    for (const RuleHit& hit : evaluation.hits) {
      out += hit.rule->name + ":" + DisplayKey(*hit.rule, hit.key) + " ";
    }
    out += "|";
    for (const RuleHit& hit : evaluation.inflight) {
      out += " " + hit.rule->name + ":" + DisplayKey(*hit.rule, hit.key);
    }
    return out;
  };
  const std::string long_user(40, 'l');  // keys past the short-string buffer
  EXPECT_EQ(evaluate(long_user, ""),
            "per-user:user=" + long_user + " per-ip:ip=192.0.2.7 | two-at-once:user=" + long_user);
  EXPECT_EQ(evaluate("", ""), "per-ip:ip=192.0.2.7 |");
  EXPECT_EQ(evaluate("bob", ""), "per-user:user=bob per-ip:ip=192.0.2.7 | two-at-once:user=bob");
  EXPECT_EQ(evaluate("carol", "admin"), "admins |");
  EXPECT_EQ(evaluate("dave", ""), "per-user:user=dave per-ip:ip=192.0.2.7 | two-at-once:user=dave");
}

// per = "message" rules never take part in a request's decision: they are
// listed apart, with their keys, for a WebSocket handshake's tunnel.
TEST(Rules, MessageRulesAreListedApart) {
  LoadResult loaded = LoadConfigText(std::string(kSkeleton) + R"(
[[rules]]
name = "per-ip"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
[[rules]]
name = "chat-messages"
match = { path_prefix = "/chat" }
key = "user"
algorithm = "token_bucket"
limit = 5
window = "1s"
per = "message"
[[rules]]
name = "all-messages"
key = "ip"
algorithm = "fixed_window"
limit = 100
window = "1m"
per = "message"
[[rules]]
name = "bots"
match = { role = "bot" }
exempt = true
)",
                                     "t.toml");
  ASSERT_TRUE(loaded.config) << loaded.errors[0].ToString();
  const RuleSet rules(loaded.config->rules);
  Headers h;
  Evaluation evaluation;
  const auto evaluate = [&](std::string_view path, std::string_view user, std::string_view role) {
    Identity id;
    id.client_ip = Ip("192.0.2.7");
    id.user = std::string(user);
    id.role = std::string(role);
    const RequestFacts facts{"GET", path, "h", "main", id.client_ip, &h};
    rules.Evaluate(facts, id, evaluation);
    std::string out;
    for (const RuleHit& hit : evaluation.hits) out += hit.rule->name + " ";
    out += "|";
    for (const RuleHit& hit : evaluation.messages) {
      out += " " + hit.rule->name + ":" + DisplayKey(*hit.rule, hit.key);
    }
    return out;
  };
  EXPECT_EQ(evaluate("/chat", "ann", ""),
            "per-ip | chat-messages:user=ann all-messages:ip=192.0.2.7");
  EXPECT_EQ(evaluate("/feed", "ann", ""), "per-ip | all-messages:ip=192.0.2.7");
  EXPECT_EQ(evaluate("/chat", "", ""), "per-ip | all-messages:ip=192.0.2.7");  // no user: no key
  // An exempt handshake's tunnel is exempt too.
  EXPECT_EQ(evaluate("/chat", "bot-1", "bot"), "|");
  EXPECT_TRUE(evaluation.messages.empty());
}

TEST(Rules, DisplayKeyShowsAddressesWhateverTheirBytes) {
  LoadResult loaded = LoadConfigText(std::string(kSkeleton) + R"(
[[rules]]
name = "per-ip"
key = ["ip", "user"]
algorithm = "fixed_window"
limit = 1
window = "1s"
)",
                                     "t.toml");
  ASSERT_TRUE(loaded.config) << loaded.errors[0].ToString();
  const RuleConfig& rule = loaded.config->rules[0];
  Headers h;
  Identity id;
  id.user = "bob";
  // 31 = 0x1f, the separator: an address is read by its size, not split.
  for (const char* ip : {"10.31.31.1", "2001:db8::1f1f"}) {
    id.client_ip = Ip(ip);
    RequestFacts facts{"GET", "/", "h", "main", id.client_ip, &h};
    EXPECT_EQ(DisplayKey(rule, KeyOf(rule, facts, id)), std::string("ip=") + ip + " user=bob");
  }
  EXPECT_EQ(DisplayKey(rule, "other\x1fx"), "");
}

// One IPv6 client usually holds a whole /64: it is keyed by its network
// ([identity] ipv6_prefix, 64 by default); IPv4, mapped or not, by its address.
TEST(Rules, Ipv6ClientsAreKeyedByTheirNetwork) {
  LoadResult loaded = LoadConfigText(std::string(kSkeleton) + R"(
[[rules]]
name = "per-ip"
key = ["ip", "user"]
algorithm = "fixed_window"
limit = 1
window = "1s"
)",
                                     "t.toml");
  ASSERT_TRUE(loaded.config) << loaded.errors[0].ToString();
  EXPECT_EQ(loaded.config->identity.ipv6_prefix, 64);
  const RuleConfig& rule = loaded.config->rules[0];
  const auto key = [&](std::string_view ip, int prefix) {
    IdentityConfig config;
    config.ipv6_prefix = prefix;
    Headers h;
    Identity id = ResolveWith(config, ip, h);
    EXPECT_EQ(id.client_ip, Ip(ip)) << "the address itself is kept (CIDRs, X-Real-IP)";
    id.user = "bob";
    RequestFacts facts{"GET", "/", "h", "main", id.client_ip, &h};
    return KeyOf(rule, facts, id);
  };
  EXPECT_EQ(key("2001:db8:1:2::1", 64), key("2001:db8:1:2:ffff:1f1f:0:7", 64));
  EXPECT_NE(key("2001:db8:1:2::1", 64), key("2001:db8:1:3::1", 64));
  EXPECT_EQ(DisplayKey(rule, key("2001:db8:1:2:ffff:1f1f:0:7", 64)),
            "ip=2001:db8:1:2::/64 user=bob");
  EXPECT_EQ(DisplayKey(rule, key("2001:db8:1:2:ffff:1f1f:0:7", 56)), "ip=2001:db8:1::/56 user=bob");
  EXPECT_EQ(DisplayKey(rule, key("2001:db8:1f1f:2::7", 31)), "ip=2001:db8::/31 user=bob");
  EXPECT_EQ(DisplayKey(rule, key("2001:db8::1", 128)), "ip=2001:db8::1 user=bob");
  EXPECT_NE(key("2001:db8::1", 128), key("2001:db8::2", 128));
  // The same network under another prefix is another key.
  EXPECT_NE(key("2001:db8::", 64), key("2001:db8::", 128));
  EXPECT_NE(key("2001:db8::", 64), key("2001:db8::", 48));
  // IPv4-mapped addresses are IPv4: one address, one key, whatever the prefix.
  EXPECT_EQ(key("::ffff:192.0.2.7", 64), key("192.0.2.7", 64));
  EXPECT_NE(key("::ffff:192.0.2.7", 8), key("::ffff:192.0.2.8", 8));
  EXPECT_EQ(DisplayKey(rule, key("::ffff:192.0.2.7", 64)), "ip=192.0.2.7 user=bob");
}

TEST(Rules, ConfigErrorsHavePositions) {
  LoadResult r = LoadConfigText(R"([[listeners]]
address = "127.0.0.1:0"
[[upstreams]]
name = "api"
servers = ["127.0.0.1:9"]
[[routes]]
upstream = "api"
[[rules]]
name = "a"
key = "user"
algorithm = "token-bucket"
limit = 10
window = "1m"
[[rules]]
name = "b"
key = "ip"
algorithm = "fixed_window"
limit = 10
window = "1m"
burst = 5
cost = 11
[[rules]]
name = "c"
key = "nose"
algorithm = "sub_window"
limit = 10
window = "1000ms"
sub_windows = 7
action = "explode"
)",
                                "t.toml");
  std::vector<std::string> messages;
  for (const ConfigError& e : r.errors) messages.push_back(e.ToString());
  const std::vector<std::string> expected = {
      R"(t.toml:11:13: "algorithm" must be one of token_bucket, leaky_bucket, fixed_window, sliding_log, sub_window, two_bucket; got "token-bucket")",
      R"(t.toml:20:9: "burst" applies to token_bucket and leaky_bucket only)",
      R"(t.toml:21:8: cost 11 exceeds the capacity 10 of this fixed_window limit, so it could never pass)",
      R"(t.toml:24:7: "key" parts must be "ip", "user", "role", "global", "route", "header:NAME", "json:PATH" or "descriptor"; got "nose")",
      R"(t.toml:26:9: window 1000ms is not divisible into 7 sub_windows of whole milliseconds)",
      R"(t.toml:29:10: "action" must be one of reject, delay, dry_run; got "explode")",
  };
  EXPECT_EQ(messages, expected);
}

}  // namespace
}  // namespace tollgate::rules
