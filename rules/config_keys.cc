#include "rules/config_keys.h"

#include <array>
#include <limits>

#include "algorithms/limit.h"
#include "algorithms/validate.h"
#include "store/calendar.h"
#include "store/redis_options.h"

namespace tollgate::rules {
namespace {

constexpr std::int64_t kMaxInt = std::numeric_limits<std::int64_t>::max();

constexpr KeySpec String(std::string_view name, std::string_view description) {
  return {.name = name, .description = description};
}
constexpr KeySpec Matching(std::string_view name, std::string_view pattern,
                           std::string_view description) {
  return {.name = name, .pattern = pattern, .description = description};
}
constexpr KeySpec Bool(std::string_view name, std::string_view description) {
  return {.name = name, .type = KeyType::kBool, .description = description};
}
constexpr KeySpec Integer(std::string_view name, std::int64_t min, std::int64_t max,
                          std::string_view description) {
  return {
      .name = name, .type = KeyType::kInteger, .min = min, .max = max, .description = description};
}
constexpr KeySpec Duration(std::string_view name, std::int64_t min_ms,
                           std::string_view description) {
  return {.name = name, .type = KeyType::kDuration, .min = min_ms, .description = description};
}
constexpr KeySpec Address(std::string_view name, std::string_view description) {
  return {.name = name, .type = KeyType::kAddress, .description = description};
}
constexpr KeySpec HeaderName(std::string_view name, std::string_view description) {
  return {.name = name, .type = KeyType::kHeaderName, .description = description};
}
constexpr KeySpec Choice(std::string_view name, std::span<const std::string_view> choices,
                         std::string_view description) {
  return {.name = name, .type = KeyType::kChoice, .choices = choices, .description = description};
}
constexpr KeySpec IntegerOrChoice(std::string_view name, std::int64_t min, std::int64_t max,
                                  std::span<const std::string_view> choices,
                                  std::string_view description) {
  return {.name = name,
          .type = KeyType::kIntegerOrChoice,
          .min = min,
          .max = max,
          .choices = choices,
          .description = description};
}
constexpr KeySpec Strings(std::string_view name, std::string_view description,
                          std::string_view pattern = {}) {
  return {.name = name, .type = KeyType::kStrings, .pattern = pattern, .description = description};
}
constexpr KeySpec StringOrStrings(std::string_view name, std::string_view description,
                                  std::string_view pattern = {}) {
  return {.name = name,
          .type = KeyType::kStringOrStrings,
          .pattern = pattern,
          .description = description};
}
constexpr KeySpec Of(KeyType type, std::string_view name, const TableSpec& table,
                     std::string_view description) {
  return {.name = name, .type = type, .table = &table, .description = description};
}
constexpr KeySpec Other(KeyType type, std::string_view name, std::string_view description) {
  return {.name = name, .type = type, .description = description};
}
constexpr KeySpec Required(KeySpec key) {
  key.presence = Presence::kRequired;
  return key;
}
constexpr KeySpec Conditional(KeySpec key) {
  key.presence = Presence::kConditional;
  return key;
}

// Status codes of refusals.
constexpr std::int64_t kMinStatus = 400;
constexpr std::int64_t kMaxStatus = 599;

constexpr KeySpec kServerKeys[] = {
    Integer("threads", 0, 256, "Worker threads; 0: one per core."),
    Duration("drain_timeout", 0, "How long a drain waits for requests in flight."),
    Bool("watch_config", "Reload when the file changes, as SIGHUP does (read at startup only)."),
    Bool("via", "Add \"Via: 1.1 tollgate\" to forwarded messages."),
};
constexpr TableSpec kServer{"server", kServerKeys};

constexpr std::string_view kClientCertModes[] = {"none", "optional", "require"};
constexpr KeySpec kTlsKeys[] = {
    Required(String("cert", "PEM certificate chain file.")),
    Required(String("key", "PEM private key file.")),
    Choice("client_cert", kClientCertModes,
           "Ask clients for a certificate: not at all, optionally, or require one."),
    String("client_ca", "PEM bundle of the CAs client certificates must chain to."),
    String("client_crl", "PEM CRLs of client_ca's issuers."),
    Duration("ticket_rotation", 1000, "How often a new generated session ticket key encrypts."),
    StringOrStrings("ticket_key_file",
                    "nginx session ticket key files (48 or 80 bytes); the first encrypts."),
};
constexpr TableSpec kTls{"tls", kTlsKeys};

constexpr KeySpec kListenerKeys[] = {
    Required(Address("address", "Where to listen: \"host:port\" or \"[v6]:port\".")),
    Of(KeyType::kTableOrTables, "tls", kTls,
       "TLS: one certificate, or several chosen by SNI (the first is the default)."),
    Bool("http2", "Serve HTTP/2 beside HTTP/1.1 (ALPN \"h2\" with TLS, prior knowledge without)."),
};
constexpr TableSpec kListener{"listener", kListenerKeys};

constexpr KeySpec kAdminKeys[] = {
    Address("address", "The admin API's and /metrics' address."),
    Bool("metrics", "Record and serve metrics (false: /metrics answers 404)."),
    String("token_env", "Environment variable holding the admin API's bearer token."),
    String("token_file", "File holding the admin API's bearer token."),
};
constexpr TableSpec kAdmin{"admin", kAdminKeys};

constexpr KeySpec kTimeoutsKeys[] = {
    Duration("client_header", 1, "Time to receive a whole request header."),
    Duration("client_idle", 1, "Keep-alive wait for a client's next request."),
    Duration("client_body", 1, "Each body read or write with the client."),
    Duration("upstream_connect", 1, "Time to connect to an upstream server."),
    Duration("upstream_response", 1, "Wait for the response header, then each body read."),
    Duration("request", 1, "The whole exchange."),
    Duration("websocket_idle", 1, "A WebSocket tunnel with no bytes either way."),
};
constexpr TableSpec kTimeouts{"timeouts", kTimeoutsKeys};

constexpr KeySpec kLimitsKeys[] = {
    Integer("max_header_bytes", 1024, 1 << 20, "Largest request header, in bytes."),
    Integer("max_body_bytes", 0, kMaxInt, "Largest request body, in bytes."),
    Integer("max_waiting", 0, 10'000'000,
            "Requests waiting (delay rules, max_inflight places), in total."),
    {.name = "weight",
     .type = KeyType::kIntegerTable,
     .min = 1,
     .max = 1000,
     .description = "A waiting request's share of turns by its role (others: 1)."},
    Integer("max_connections", 1, 10'000'000,
            "Client connections of the process (default: from the descriptor limit)."),
    Integer("max_concurrent_streams", 1, 100'000,
            "Streams in flight on one HTTP/2 client connection."),
    Integer("max_websocket_message_bytes", 1, kMaxInt,
            "Largest client WebSocket message in a tunnel with message-rate rules."),
};
constexpr TableSpec kLimits{"limits", kLimitsKeys};

constexpr std::string_view kLogFormats[] = {"combined", "json"};
constexpr std::string_view kLogLevels[] = {"trace", "debug",    "info", "warn",
                                           "error", "critical", "off"};
constexpr KeySpec kLogKeys[] = {
    String("access", "Access log: \"stdout\", \"off\" or a file path."),
    Choice("format", kLogFormats, "Access log format."),
    Choice("level", kLogLevels, "Level of the operational log (stderr)."),
};
constexpr TableSpec kLog{"log", kLogKeys};

constexpr KeySpec kUpstreamTlsKeys[] = {
    Bool("verify", "Verify the server's certificate."),
    String("ca_file", "PEM CA bundle (default: the system's CAs)."),
    String("sni", "Server name sent (default: the server's host)."),
};
constexpr TableSpec kUpstreamTls{"upstream_tls", kUpstreamTlsKeys};

constexpr KeySpec kAdaptiveKeys[] = {
    Integer("min", 1, 10'000'000, "The lowest the adaptive limit goes."),
    Integer("max", 1, 10'000'000, "The highest the adaptive limit goes."),
    Integer("initial", 1, 10'000'000, "The limit before the first measurement."),
    Duration("target_latency", 1, "The latency aimed at (default: the lowest recent one)."),
    Integer("tolerance_percent", 0, 1000, "Latency above the lowest recent one still on target."),
    Duration("window", 1, "How often the limit moves (with at least 50 samples)."),
    Duration("probe_interval", 0, "How often one window runs at half the limit; 0: never."),
};
constexpr TableSpec kAdaptive{"adaptive_concurrency", kAdaptiveKeys};

constexpr std::string_view kConcurrencyChoices[] = {"adaptive"};
constexpr std::string_view kProtocols[] = {"http1", "h2", "h2c"};
constexpr KeySpec kUpstreamKeys[] = {
    Required(String("name", "The name routes refer to.")),
    Required(Strings("servers", "The servers, \"host:port\" each.", ":[0-9]+$")),
    Duration("fail_timeout", 0, "How long a failed server is left out."),
    Integer("max_idle", 0, 100'000, "Idle keep-alive connections per server and thread."),
    Duration("idle_timeout", 1, "How long an idle keep-alive connection is kept."),
    Of(KeyType::kTable, "tls", kUpstreamTls, "TLS towards the servers (tls = {} for defaults)."),
    Choice("protocol", kProtocols,
           "HTTP/1.1, HTTP/2 over TLS, or cleartext HTTP/2 with prior knowledge."),
    Bool("learn_limits", "Honour the upstream's own rate-limit headers."),
    Matching("learn_bucket", "^(route|upstream|/.*)$",
             "Which requests share learned limits: \"route\", \"upstream\" or a path pattern."),
    Duration("learn_max_delay", 0, "Longest wait for a learned limit's reset."),
    IntegerOrChoice("concurrency", 1, 10'000'000, kConcurrencyChoices,
                    "Requests in flight towards this upstream, or \"adaptive\"."),
    Of(KeyType::kTable, "adaptive", kAdaptive, "The adaptive limit's bounds and parameters."),
    Integer("max_connections", 1, 10'000'000, "The older name of concurrency = N."),
    Integer("max_connections_status", kMinStatus, kMaxStatus,
            "Status of a request refused beyond the concurrency limit."),
    Duration("max_connections_delay", 0, "How long a request beyond the limit waits."),
};
constexpr TableSpec kUpstream{"upstream", kUpstreamKeys};

constexpr std::string_view kPriorities[] = {"high", "normal", "low"};
constexpr KeySpec kRouteKeys[] = {
    Matching("path_prefix", "^/", "Path prefix the route matches (default \"/\")."),
    String("host", "Host the route matches (default: any)."),
    String("name", "Name in logs and metrics (default: host and path_prefix)."),
    Bool("websocket", "Tunnel WebSocket handshakes (false: answered 400)."),
    Choice("priority", kPriorities, "Its requests' priority in every wait (a rule's wins)."),
    Required(String("upstream", "The [[upstreams]] name requests go to.")),
};
constexpr TableSpec kRoute{"route", kRouteKeys};

constexpr std::string_view kJwtAlgorithms[] = {"HS256", "RS256", "ES256"};
constexpr std::string_view kOnInvalid[] = {"anonymous", "reject"};
constexpr KeySpec kJwtKeys[] = {
    Choice("algorithm", kJwtAlgorithms, "The tokens' signature algorithm."),
    String("secret_env", "Environment variable holding the HS256 secret."),
    String("secret_file", "File holding the HS256 secret."),
    String("public_key_file", "PEM public key of RS256 or ES256."),
    String("user_claim", "Claim naming the user."),
    String("role_claim", "Claim naming the role."),
    Duration("leeway", 0, "Clock skew allowed on exp and nbf."),
    Choice("on_invalid", kOnInvalid, "An invalid token: go on anonymous, or refuse (401)."),
};
constexpr TableSpec kJwt{"jwt", kJwtKeys};

constexpr std::string_view kCertificateUsers[] = {"subject_cn", "san_uri", "san_dns", "sha256"};
constexpr KeySpec kClientCertKeys[] = {
    Choice("user", kCertificateUsers, "Which part of the client certificate names the user."),
    Matching("role", "^subject_[a-zA-Z]+$",
             "The subject attribute naming the role (\"subject_ou\", ...)."),
    HeaderName("subject_header", "Header forwarding the certificate's subject."),
    HeaderName("sha256_header", "Header forwarding the certificate's SHA-256."),
};
constexpr TableSpec kClientCert{"client_cert", kClientCertKeys};

constexpr KeySpec kIdentityKeys[] = {
    StringOrStrings("trusted_proxies",
                    "CIDRs whose X-Forwarded-For and identity headers are believed."),
    HeaderName("user_header", "Header naming the user, from trusted proxies."),
    HeaderName("role_header", "Header naming the role, from trusted proxies."),
    Integer("ipv6_prefix", 1, 128, "IPv6 clients are keyed by this prefix."),
    Of(KeyType::kTable, "jwt", kJwt, "JWT bearer tokens."),
    Of(KeyType::kTable, "client_cert", kClientCert, "TLS client certificates."),
};
constexpr TableSpec kIdentity{"identity", kIdentityKeys};

constexpr std::string_view kOnError[] = {"allow", "deny", "local", "share"};
constexpr std::string_view kRedisTime[] = {"server", "client"};
constexpr KeySpec kRedisKeys[] = {
    String("url", "redis://[user:password@]host:port[/db] of one Redis."),
    Strings("nodes", "Redis Cluster seeds, \"host:port\" or redis:// URLs."),
    String("prefix", "Prefix of every key."),
    Duration("timeout", 1, "Deadline of each Redis call."),
    Integer("pool", 1, 64, "Connections per thread."),
    Integer("max_pending", 1, 1'000'000, "Calls waiting for Redis."),
    Integer("batch", 1, static_cast<std::int64_t>(store::RedisOptions::kMaxBatch),
            "Decisions per Redis call."),
    Choice("on_error", kOnError, "What a decision is when Redis cannot answer."),
    Choice("time", kRedisTime, "Whose clock decides: Redis's or the gateway's."),
    Duration("inflight_ttl", 1, "Lifetime of a concurrency slot in Redis."),
};
constexpr TableSpec kRedis{"redis", kRedisKeys};

constexpr std::string_view kStoreKinds[] = {"local", "redis"};
constexpr KeySpec kStoreKeys[] = {
    Choice("kind", kStoreKinds, "Where counters live."),
    Integer("max_keys", 1, std::int64_t{1} << 32, "Keys of the local store, all rules together."),
    Of(KeyType::kTable, "redis", kRedis, "The Redis store's settings."),
};
constexpr TableSpec kStore{"store", kStoreKeys};

constexpr KeySpec kDecisionKeys[] = {
    Required(Address("address", "Where the decision service listens.")),
    Of(KeyType::kTable, "tls", kTls, "TLS of the decision service (mTLS with client_cert)."),
    StringOrStrings("allow", "CIDRs of the clients allowed to connect."),
    Integer("deny_status", kMinStatus, kMaxStatus, "Status of every refusal of /check."),
};
constexpr TableSpec kDecision{"decision", kDecisionKeys};

// The conditions of both `match` and its `not`.
constexpr std::array kMatchConditions = {
    Matching("path_prefix", "^/", "Requests whose path starts with this."),
    Strings("methods", "Requests with one of these methods."),
    StringOrStrings("role", "Requests of one of these roles."),
    StringOrStrings("ip", "Requests from these CIDRs."),
    String("host", "Requests for this host."),
    Other(KeyType::kStringTable, "header", "Requests with these header values."),
    Bool("anonymous", "Requests without (true) or with (false) a user."),
};

template <std::size_t N, std::size_t M>
constexpr std::array<KeySpec, N + M> Join(const std::array<KeySpec, N>& a,
                                          const std::array<KeySpec, M>& b) {
  std::array<KeySpec, N + M> out;
  for (std::size_t i = 0; i < N; ++i) out[i] = a[i];
  for (std::size_t i = 0; i < M; ++i) out[N + i] = b[i];
  return out;
}

constexpr auto kMatchNotKeys = Join(
    kMatchConditions, std::array{
                          Other(KeyType::kNever, "not", "A \"not\" cannot hold another \"not\"."),
                      });
constexpr TableSpec kMatchNot{"match_not", kMatchNotKeys};
constexpr auto kMatchKeys =
    Join(kMatchConditions,
         std::array{
             Matching("domain", ".", "The Envoy RLS domain (a rule of RLS descriptors)."),
             Other(KeyType::kDescriptorTable, "descriptor",
                   "RLS descriptor entries: name = \"value\", \"*\" or { not = [...] }."),
             Of(KeyType::kTable, "not", kMatchNot, "Requests to leave out."),
         });
constexpr TableSpec kMatch{"match", kMatchKeys};

constexpr KeySpec kWindowKeys[] = {
    Required(Integer("limit", 1, kMaxInt, "Units allowed per window.")),
    Required(Duration("window", 1, "The window's length.")),
};
constexpr TableSpec kWindow{"window", kWindowKeys};

// A request's cost or its settled cost, when not a choice: { header } or { json }.
constexpr KeySpec kValueSourceKeys[] = {
    HeaderName("header", "The header whose integer value it is."),
    Matching("json", "^[^.]+(\\.[^.]+)*$",
             "The dotted JSON path of a number in the body (keys, array indices)."),
};
constexpr TableSpec kValueSource{"value_source", kValueSourceKeys};
constexpr std::string_view kCostChoices[] = {"request_bytes", "openai", "anthropic"};
constexpr std::string_view kSettleChoices[] = {"response_bytes"};
constexpr std::string_view kTokens[] = {"total", "input", "output", "price"};
constexpr std::string_view kReserve[] = {"estimate"};
constexpr std::int64_t kMaxCost = std::int64_t{1} << 40;

constexpr std::string_view kPriceUnits[] = {"1", "1K", "1M"};
constexpr KeySpec kPriceKeys[] = {
    Required(String("model", "The model names it applies to; a trailing * matches any rest.")),
    {.name = "input",
     .type = KeyType::kNumber,
     .description = "Cost units per unit of input tokens."},
    {.name = "output",
     .type = KeyType::kNumber,
     .description = "Cost units per unit of output tokens."},
    Choice("unit", kPriceUnits, "Tokens the prices are per: 1, a thousand or a million."),
};
constexpr TableSpec kPrice{"price", kPriceKeys};

constexpr std::string_view kPer[] = {"request", "message"};
constexpr std::string_view kSync[] = {"exact", "lease"};
constexpr std::string_view kActions[] = {"reject", "delay", "dry_run"};
constexpr std::string_view kHeaders[] = {"all", "limited", "none"};
constexpr KeySpec kRuleKeys[] = {
    Required(Matching("name", "^[ -~]+$", "The rule's name (printable ASCII), unique.")),
    Of(KeyType::kTable, "match", kMatch, "Which requests the rule applies to."),
    Bool("exempt", "Matching requests skip the rules after this one."),
    Conditional(StringOrStrings(
        "key", "What is counted apart (not in exempt rules).",
        "^(ip|user|role|global|route|descriptor|header:[-!#$%&'*+.^_`|~0-9A-Za-z]+|json:[ -~]+)$")),
    Choice("per", kPer, "Count requests, or WebSocket messages."),
    Integer("max_inflight", 1, 10'000'000, "A concurrency rule: requests in flight."),
    Conditional(Choice("algorithm", algorithms::kAlgorithmNames,
                       "The algorithm (not in exempt or concurrency rules).")),
    Of(KeyType::kTables, "limits", kWindow, "Several windows (instead of limit and window)."),
    Conditional(Integer("limit", 0, kMaxInt, "Units allowed per window.")),
    Conditional(Duration("window", 1, "The window's length.")),
    Choice("calendar", store::kCalendarUnitNames,
           "fixed_window: calendar periods as windows (instead of window)."),
    Matching("timezone", "^[-+_/A-Za-z0-9]+$",
             "The IANA time zone of calendar's periods (default \"UTC\")."),
    Integer("burst", 0, std::int64_t{1} << 40, "Bucket size (token_bucket, leaky_bucket)."),
    Integer("sub_windows", 1, algorithms::kMaxSubWindows, "Sub-windows of sub_window."),
    Bool("nodelay", "leaky_bucket: admit a burst at once instead of spacing it."),
    {.name = "cost",
     .type = KeyType::kSource,
     .min = 1,
     .max = kMaxCost,
     .choices = kCostChoices,
     .table = &kValueSource,
     .description = "Units each request costs, or where the cost comes from."},
    Integer("cost_default", 1, kMaxCost, "The cost of a request that does not say it."),
    {.name = "settle",
     .type = KeyType::kSource,
     .choices = kSettleChoices,
     .table = &kValueSource,
     .description = "Where the response says what the request really cost."},
    Choice("tokens", kTokens, "LLM presets: which tokens are counted, or their price."),
    Choice("reserve", kReserve, "LLM presets: reserve an estimate, not the upper bound."),
    Integer("max_output_tokens", 1, kMaxCost,
            "LLM presets: the output bound of a request "
            "that sets none."),
    Choice("sync", kSync, "Share keys through Redis per decision, or by leases."),
    Duration("lease_ttl", 1, "Lifetime of a lease (sync = \"lease\")."),
    Integer("lease_max", 1, kMaxInt, "Most units of one lease (sync = \"lease\")."),
    Choice("action", kActions, "What happens beyond the limit."),
    Duration("max_delay", 1, "Longest wait of a delayed request."),
    Integer("max_waiting", 1, 1'000'000, "Requests this rule holds at once."),
    StringOrStrings("fair_key", "The flow a waiting request belongs to (default: its client).",
                    "^(ip|user|role|global|route|header:[-!#$%&'*+.^_`|~0-9A-Za-z]+)$"),
    Integer("max_waiting_per_flow", 1, 1'000'000, "Requests of one flow waiting for one key."),
    Choice("priority", kPriorities, "The requests' priority in every wait."),
    Integer("status", kMinStatus, kMaxStatus, "Status of a refused request."),
    Choice("headers", kHeaders, "Which responses carry the RateLimit headers."),
    Integer("max_keys", 1, std::int64_t{1} << 32, "This rule's part of [store] max_keys."),
};
constexpr TableSpec kRule{"rule", kRuleKeys};

constexpr KeySpec kRootKeys[] = {
    Of(KeyType::kTable, "server", kServer, "Process-wide settings."),
    Of(KeyType::kTables, "listeners", kListener, "Listening addresses for proxied traffic."),
    Of(KeyType::kTable, "admin", kAdmin, "The admin API, status page and metrics."),
    Of(KeyType::kTable, "timeouts", kTimeouts, "Deadlines of client and upstream I/O."),
    Of(KeyType::kTable, "limits", kLimits, "Bounds of requests and connections."),
    Of(KeyType::kTable, "log", kLog, "Access and operational logs."),
    Of(KeyType::kTables, "upstreams", kUpstream, "Groups of servers requests go to."),
    Of(KeyType::kTables, "routes", kRoute, "Which upstream a request goes to, in order."),
    Of(KeyType::kTable, "identity", kIdentity, "Who a client is."),
    Of(KeyType::kTable, "store", kStore, "Where rate-limit counters live."),
    Of(KeyType::kTable, "decision", kDecision, "The decision service for other proxies."),
    Of(KeyType::kTables, "rules", kRule, "Rules, checked in file order."),
    Of(KeyType::kTables, "prices", kPrice, "Prices of LLM models, for tokens = \"price\"."),
};
constexpr TableSpec kRoot{"tollgate", kRootKeys};

}  // namespace

const KeySpec* TableSpec::Find(std::string_view key) const {
  for (const KeySpec& k : keys) {
    if (k.name == key) return &k;
  }
  return nullptr;
}

const TableSpec& RootTable() { return kRoot; }

}  // namespace tollgate::rules
