// The configuration model: what a TOML file says, checked and with defaults
// filled in. Built once per load (startup or reload) and then immutable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rules/budget.h"
#include "rules/config_reader.h"
#include "rules/duration.h"
#include "rules/rule.h"

namespace tollgate::rules {

struct CertificateConfig {
  std::string cert_file;  // PEM chain
  std::string key_file;   // PEM private key
};

// Whether a TLS listener asks clients for a certificate: not at all, or
// asks and goes on anonymous without a valid one, or refuses the handshake
// without a valid one.
enum class ClientCertMode : std::uint8_t { kNone, kOptional, kRequire };

// A TLS listener's options besides its certificates.
struct ListenerTlsConfig {
  ClientCertMode client_cert = ClientCertMode::kNone;
  std::string client_ca;   // PEM bundle client certificates must chain to
  std::string client_crl;  // PEM CRLs of client_ca's issuers; empty: none
  // Generated session ticket keys: a new one encrypts every this long, the
  // one before still decrypts (so a ticket lives one rotation at most).
  std::int64_t ticket_rotation_ms = 3'600'000;
  // nginx ssl_session_ticket_key files (48 or 80 bytes), shared by several
  // gateways: the first encrypts, all decrypt, none is rotated here.
  // Empty: generated keys.
  std::vector<std::string> ticket_key_files;
  friend bool operator==(const ListenerTlsConfig&, const ListenerTlsConfig&) = default;
};

struct ListenerConfig {
  HostPort address;
  // Empty: plain HTTP. Several: chosen by SNI, the first is the default.
  std::vector<CertificateConfig> certificates;
  ListenerTlsConfig tls_options;
  // HTTP/2 next to HTTP/1.1: ALPN "h2" with TLS, prior knowledge without.
  bool http2 = true;
  bool tls() const { return !certificates.empty(); }
};

// [decision]: the decision service for other proxies
// (gateway/decision/): the check endpoint (HTTP/1.1) and Envoy's RLS
// (gRPC over HTTP/2) on one listener of its own.
struct DecisionConfig {
  // Address and tls (with client_cert = "require", only clients with a
  // certificate of client_ca get past the handshake); HTTP/2 always.
  ListenerConfig listener;
  // The clients' networks: a connection from another address is closed
  // once accepted. Empty: any address that can reach the listener.
  std::vector<Cidr> allow;
  // Replaces the status of every refusal of the check endpoint (nginx's
  // auth_request takes only 401 and 403 as a refusal); 0: the refusal's own.
  unsigned deny_status = 0;
};

struct ServerConfig {
  int threads = 0;  // 0: one per core
  std::int64_t drain_timeout_ms = 10'000;
  bool via = false;  // add "Via: 1.1 tollgate" to forwarded messages
  // Reload when the file changes (checked every second; read once it has
  // stayed unchanged for a check), as SIGHUP does. Read at startup only.
  bool watch_config = false;
};

struct AdminConfig {
  HostPort address{"127.0.0.1", 9090};
  bool metrics = true;  // false: nothing is recorded, /metrics answers 404
  // The bearer token of the /api/ endpoints (token_env / token_file, at
  // least kMinAdminTokenBytes); empty: none (read-only, loopback only).
  std::string token;
};
inline constexpr std::size_t kMinAdminTokenBytes = 32;

struct TimeoutsConfig {
  std::int64_t client_header_ms = 10'000;  // whole request header (slowloris)
  std::int64_t client_idle_ms = 60'000;    // keep-alive wait for the next request
  std::int64_t client_body_ms = 60'000;    // each body read/write with the client
  std::int64_t upstream_connect_ms = 2'000;
  std::int64_t upstream_response_ms = 30'000;  // response header, then each body read
  std::int64_t request_ms = 300'000;           // the whole exchange
  std::int64_t websocket_idle_ms = 300'000;    // a WebSocket tunnel with no bytes either way
};

struct LimitsConfig {
  std::int64_t max_header_bytes = 16'384;
  std::int64_t max_body_bytes = 10'485'760;
  // Requests waiting in the process for delay rules and max_inflight
  // places, in total; and for each upstream's places.
  std::int64_t max_waiting = 10'000;
  // A waiting request's weight in the fair order by its role (role, weight);
  // a role not listed, or none, weighs 1.
  std::vector<std::pair<std::string, std::uint32_t>> weight;
  // Client connections of the process; 0: derived from the descriptor
  // limit (gateway::MaxConnectionsFor).
  std::int64_t max_connections = 0;
  // Streams in flight on one HTTP/2 client connection.
  std::int64_t max_concurrent_streams = 128;
  // A client's WebSocket data message (its frames' payloads together) in a
  // tunnel with message-rate rules; a larger one closes the tunnel (1009).
  std::int64_t max_websocket_message_bytes = 1'048'576;
};

enum class LogFormat { kCombined, kJson };

struct LogConfig {
  std::string access = "stdout";  // "stdout", "off" or a file path
  LogFormat format = LogFormat::kCombined;
  std::string level = "info";  // trace|debug|info|warn|error|critical|off
};

struct UpstreamTlsConfig {
  bool verify = true;
  std::string ca_file;  // empty: the system's default CA paths
  std::string sni;      // empty: the server's host
};

// Which requests share a bucket of limits learned from an upstream.
enum class LearnBucket : std::uint8_t { kRoute, kUpstream, kPattern };

// How requests reach an upstream's servers: HTTP/1.1, HTTP/2 over TLS (ALPN
// "h2"), or cleartext HTTP/2 with prior knowledge (RFC 9113 §3.3).
enum class UpstreamProtocol : std::uint8_t { kHttp1, kH2, kH2c };

// `concurrency = "adaptive"`: the upstream's concurrency limit follows its
// latency (gateway/core/adaptive_limit.h says how), within [min, max].
struct AdaptiveConcurrencyConfig {
  std::int64_t min = 1;
  std::int64_t max = 1000;
  std::int64_t initial = 16;  // within [min, max]
  // The latency aimed at (ms); 0: the lowest recent latency + tolerance.
  std::int64_t target_latency_ms = 0;
  std::int64_t tolerance_percent = 10;
  std::int64_t window_ms = 250;
  // How often one window runs at half the limit (0: never).
  std::int64_t probe_interval_ms = 15'000;

  bool operator==(const AdaptiveConcurrencyConfig&) const = default;
};

struct UpstreamConfig {
  std::string name;
  std::vector<HostPort> servers;
  std::int64_t fail_timeout_ms = 10'000;
  std::int64_t max_idle = 64;  // idle keep-alive connections per server and thread
  std::int64_t idle_timeout_ms = 60'000;
  std::optional<UpstreamTlsConfig> tls;
  UpstreamProtocol protocol = UpstreamProtocol::kHttp1;  // kH2 has tls, kH2c has none
  // Honour the upstream's own rate-limit headers (algorithms/learned.h).
  bool learn_limits = false;
  LearnBucket learn_bucket = LearnBucket::kRoute;
  std::vector<std::string> learn_pattern;  // kPattern: path segments, "{x}" matches any one
  std::int64_t learn_max_delay_ms = 5'000;
  // Requests in flight towards this upstream (all threads); 0: no cap
  // (`concurrency = N`, or its older name max_connections).
  std::int64_t max_connections = 0;
  // Set: the cap adapts (`concurrency = "adaptive"`); max_connections is 0.
  std::optional<AdaptiveConcurrencyConfig> adaptive;
  unsigned max_connections_status = 503;
  // How long a request beyond the cap waits for a place (0: refused
  // at once); at most limits.max_waiting wait per upstream.
  std::int64_t max_connections_delay_ms = 0;
};

struct RouteConfig {
  std::string name;  // for logs and metrics; default: the path_prefix
  std::string path_prefix = "/";
  std::string host;  // empty: any host
  std::string upstream;
  std::size_t upstream_index = 0;  // into Config::upstreams
  bool websocket = true;           // WebSocket handshakes are tunnelled (false: answered 400)
  // Its requests' priority in every wait, unless a rule they match says.
  Priority priority = Priority::kNormal;
};

struct Config {
  std::string path;
  std::string digest;  // 12 hex digits of the file's SHA-256: the config's version
  ServerConfig server;
  std::vector<ListenerConfig> listeners;
  AdminConfig admin;
  TimeoutsConfig timeouts;
  LimitsConfig limits;
  LogConfig log;
  std::vector<UpstreamConfig> upstreams;
  std::vector<RouteConfig> routes;
  IdentityConfig identity;
  StoreConfig store;
  std::vector<RuleConfig> rules;   // in file order
  std::vector<ModelPrice> prices;  // [[prices]]
  std::optional<DecisionConfig> decision;
};

struct LoadResult {
  std::optional<Config> config;     // set when errors is empty
  std::vector<ConfigError> errors;  // every problem found, in file order
};

// Never throws: syntax errors and I/O errors become ConfigErrors too.
LoadResult LoadConfigFile(const std::string& path);
LoadResult LoadConfigText(std::string_view text, const std::string& name);

}  // namespace tollgate::rules
