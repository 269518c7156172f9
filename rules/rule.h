// Rate-limit rules, identity and store settings as the configuration states
// them, validated. Part of rules::Config; immutable once loaded.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/limit.h"
#include "rules/budget.h"
#include "rules/ip.h"
#include "rules/priority.h"
#include "store/redis_options.h"
#include "store/store.h"

namespace tollgate::rules {

// kDescriptor: an Envoy RLS descriptor's entries (rules with `domain` or
// `descriptor` only).
enum class KeyPartKind { kIp, kUser, kRole, kGlobal, kRoute, kHeader, kDescriptor, kJson };

struct KeyPart {
  KeyPartKind kind = KeyPartKind::kIp;
  // kHeader: the header's name; kJson: the dotted path of a value in the
  // JSON request body (json:PATH; such parts come last in RuleConfig::key).
  std::string header;
};

enum class RuleAction { kReject, kDelay, kDryRun };
// What a rate rule counts (`per`): requests, or each data message a client
// sends through a WebSocket tunnel whose handshake the rule matches.
enum class LimitUnit : std::uint8_t { kRequest, kMessage };
enum class RateLimitHeaders { kAll, kLimited, kNone };

// Every condition present must hold; an absent one matches anything.
struct RuleMatch {
  std::string path_prefix;
  std::vector<std::string> methods;  // upper case
  std::vector<std::string> roles;
  std::vector<Cidr> ips;                                     // the client IP (see IdentityConfig)
  std::string host;                                          // lower case, no port
  std::vector<std::pair<std::string, std::string>> headers;  // name, exact value
  std::optional<bool> anonymous;                             // true: no user; false: a user
  // `not = { ... }`: a request that meets every condition of this (never
  // empty, never itself with a `not`) is not matched.
  std::shared_ptr<const RuleMatch> exclude;
  // Envoy RLS (the decision service): the call's domain, and a descriptor
  // whose entries are exactly these keys (sorted by key), each value equal
  // or "*" for any. A rule with either decides RLS descriptors only; a rule
  // with neither, HTTP requests only (proxied or checked).
  std::string domain;
  std::vector<std::pair<std::string, std::string>> descriptor;
  // Keys of `descriptor` written `{ not = [...] }`: "*" there, and these
  // values are not taken (as envoyproxy/ratelimit, where an entry with a
  // value takes it from the entry without one).
  std::vector<std::pair<std::string, std::vector<std::string>>> descriptor_except;
  bool ForDescriptors() const { return !domain.empty() || !descriptor.empty(); }
};

struct WindowLabel {
  std::string text;      // as written, e.g. "1m": names the policy in headers
  std::int64_t seconds;  // for RateLimit-Policy's w
};

struct RuleConfig {
  std::string name;
  RuleMatch match;
  bool exempt = false;  // a match lets the request through, no later rule applies
  std::vector<KeyPart> key;
  // The key has json:PATH parts (the last ones): its value needs the
  // request body, read before the rule is decided.
  bool body_key = false;
  // "ip", "user", "header:X-Api-Key", "user+route": what the key is made
  // of (never a key's value), for logs.
  std::string KeyKind() const;
  std::shared_ptr<const store::LimitSpec> limit;  // null for exempt and concurrency rules
  // > 0: a concurrency rule: at most this many requests of one key in
  // flight at once (like nginx's limit_conn, per request); no `limit`.
  std::int64_t max_inflight = 0;
  std::vector<WindowLabel> windows;  // parallel to limit->windows
  // The units each request costs: `cost` as an integer, or `cost_default`
  // when the cost is to come from the request (budget.cost).
  std::int64_t cost = 1;
  // Where a request's cost and its settled cost come from (rules/budget.h;
  // gateway/core/request_cost.h and settlement.h apply it).
  RuleBudget budget;
  // kMessage: the rule takes no part in request decisions (RuleSet puts it
  // in Evaluation::messages); the tunnel decides each message by it.
  LimitUnit per = LimitUnit::kRequest;
  RuleAction action = RuleAction::kReject;
  // kDelay, or a concurrency rule with a wait: the longest a request is held
  // (0 for a concurrency rule: refused at once), and how many of one key
  // may be held at once.
  std::int64_t max_delay_ms = 0;
  std::int64_t max_waiting = 100;
  // Those waits are taken in turn, fairly between flows
  // (gateway/core/waiting_room.h). A request's flow is the value of
  // `fair_key` (empty: its client: its user, else its address); at most
  // `max_waiting_per_flow` of one flow wait in one key's line (0: as many
  // as max_waiting).
  std::vector<KeyPart> fair_key;
  std::int64_t max_waiting_per_flow = 0;
  // The priority of the requests it matches in every wait (of this rule,
  // another, or an upstream's place): the first matching rule that sets
  // one says; none: normal.
  std::optional<Priority> priority;
  unsigned status = 429;
  RateLimitHeaders headers = RateLimitHeaders::kAll;
  // Keys this rule may keep in the local store (its partition's bound): its
  // own `max_keys`, or an even share of what those leave of [store]
  // max_keys. 0 for exempt and concurrency rules, which keep none.
  std::size_t max_keys = 0;
};

enum class JwtAlgorithm { kHs256, kRs256, kEs256 };
enum class OnInvalidToken { kAnonymous, kReject };

struct JwtConfig {
  JwtAlgorithm algorithm = JwtAlgorithm::kHs256;
  std::string secret;          // HS256: the key bytes (from secret_env or secret_file)
  std::string public_key_pem;  // RS256/ES256: the key itself (read from public_key_file)
  std::string user_claim = "sub";
  std::string role_claim = "role";
  std::int64_t leeway_ms = 30'000;
  OnInvalidToken on_invalid = OnInvalidToken::kAnonymous;
};

// Which field of a verified client certificate names the user.
enum class CertificateUser : std::uint8_t { kSubjectCn, kSanUri, kSanDns, kSha256 };

// [identity.client_cert]: users (and roles) from the client certificate a
// listener verified (its tls.client_cert). Such an identity wins over a JWT
// and over trusted identity headers.
struct ClientCertIdentityConfig {
  CertificateUser user = CertificateUser::kSubjectCn;
  // A subject attribute's short name in lower case ("ou" from role =
  // "subject_ou"); empty: no role from the certificate.
  std::string role_attribute;
  // The verified certificate passed upstream (RFC 2253 subject, SHA-256
  // fingerprint in lower-case hex); the client's own fields of these names
  // are always removed. Empty: not passed.
  std::string subject_header = "X-Client-Cert-Subject";
  std::string sha256_header = "X-Client-Cert-Sha256";
};

struct IdentityConfig {
  std::vector<Cidr> trusted_proxies;
  int ipv6_prefix = 64;     // the `ip` key of an IPv6 client is its network of this many bits
  std::string user_header;  // empty: users come only from JWTs
  std::string role_header;
  std::optional<JwtConfig> jwt;
  std::optional<ClientCertIdentityConfig> client_cert;
};

enum class StoreKind : std::uint8_t { kLocal, kRedis };

// What decides while the Redis store cannot (timeout, unreachable, circuit
// open): let the request through, refuse it (503), or the local store.
// [store] on_error: the store decorators' policy (store/failover_store.h).
using StoreFailurePolicy = store::FailurePolicy;

struct StoreConfig {
  StoreKind kind = StoreKind::kLocal;
  std::size_t max_keys = 1'000'000;  // local store (also the fallback of on_error = "local")
  store::RedisOptions redis;
  StoreFailurePolicy on_error = StoreFailurePolicy::kLocal;

  friend bool operator==(const StoreConfig& a, const StoreConfig& b);
};

}  // namespace tollgate::rules
