#include "rules/config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <tuple>

#include "rules/normalize.h"
#include "rules/rules_config.h"

namespace tollgate::rules {
namespace {

constexpr std::int64_t kMaxInt = std::numeric_limits<std::int64_t>::max();

void CheckReadable(const toml::value& at, const std::string& file, std::string_view what,
                   ErrorList& errors) {
  std::ifstream in(file);
  if (!in) errors.Add(at, fmt::format("cannot read {} \"{}\"", what, file));
}

void ReadServer(TableReader r, ServerConfig& out) {
  if (auto v = r.Integer("threads", 0, 256)) out.threads = static_cast<int>(*v);
  if (auto v = r.DurationMs("drain_timeout")) out.drain_timeout_ms = *v;
  if (auto b = r.Bool("watch_config")) out.watch_config = *b;
  if (auto v = r.Bool("via")) out.via = *v;
  r.Finish();
}

// The number of PEM blocks of `label` ("CERTIFICATE", "X509 CRL") that
// parse in `file`.
int CountPem(const std::string& file, std::string_view label) {
  BIO* bio = BIO_new_file(file.c_str(), "r");
  if (bio == nullptr) return 0;
  int count = 0;
  for (;;) {
    if (label == "CERTIFICATE") {
      X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
      if (cert == nullptr) break;
      X509_free(cert);
    } else {
      X509_CRL* crl = PEM_read_bio_X509_CRL(bio, nullptr, nullptr, nullptr);
      if (crl == nullptr) break;
      X509_CRL_free(crl);
    }
    ++count;
  }
  ERR_clear_error();
  BIO_free(bio);
  return count;
}

// A PEM file that must hold at least one `label` block.
std::optional<std::string> ReadPemFile(TableReader& r, std::string_view key, std::string_view label,
                                       std::string_view what) {
  auto file = r.String(key);
  if (!file) return std::nullopt;
  const toml::value& at = *r.Find(key);
  std::ifstream in(*file);
  if (!in) {
    r.errors().Add(at, fmt::format("cannot read {} \"{}\"", what, *file));
    return std::nullopt;
  }
  if (CountPem(*file, label) == 0) {
    r.errors().Add(at, fmt::format("{} \"{}\" holds no PEM {}", what, *file, label));
    return std::nullopt;
  }
  return file;
}

// Session ticket key files in nginx's format: 48 bytes (AES-128) or 80
// bytes (AES-256) of random data each.
void ReadTicketKeyFiles(TableReader& r, std::vector<std::string>& out) {
  const toml::value* v = r.Find("ticket_key_file");
  if (v == nullptr) return;
  std::vector<const toml::value*> items;
  if (v->is_array()) {
    for (const toml::value& item : v->as_array()) items.push_back(&item);
    if (items.empty()) r.errors().Add(*v, "\"ticket_key_file\" lists no file");
  } else {
    items.push_back(v);
  }
  for (const toml::value* item : items) {
    auto file = ReadString(*item, "ticket_key_file", r.errors());
    if (!file) continue;
    std::error_code ec;
    const auto size = std::filesystem::file_size(*file, ec);
    if (ec) {
      r.errors().Add(*item, fmt::format("cannot read session ticket key \"{}\"", *file));
    } else if (size != 48 && size != 80) {
      r.errors().Add(*item, fmt::format("session ticket key \"{}\" has {} bytes; it must have 48 "
                                        "or 80 (openssl rand 80 > file)",
                                        *file, size));
    } else {
      out.push_back(*file);
    }
  }
}

// The listener-wide keys of a "tls" table.
void ReadListenerTls(TableReader& r, ListenerTlsConfig& out) {
  if (auto mode = r.OneOf("client_cert", {"none", "optional", "require"})) {
    out.client_cert = *mode == "require"    ? ClientCertMode::kRequire
                      : *mode == "optional" ? ClientCertMode::kOptional
                                            : ClientCertMode::kNone;
  }
  if (auto ca = ReadPemFile(r, "client_ca", "CERTIFICATE", "client CA bundle")) out.client_ca = *ca;
  if (auto crl = ReadPemFile(r, "client_crl", "X509 CRL", "CRL file")) out.client_crl = *crl;
  if (auto d = r.DurationMs("ticket_rotation", 1000)) out.ticket_rotation_ms = *d;
  ReadTicketKeyFiles(r, out.ticket_key_files);
  if (out.client_cert != ClientCertMode::kNone && !r.Has("client_ca")) {
    r.errors().Add(*r.Find("client_cert"),
                   "client_cert = \"optional\" or \"require\" needs \"client_ca\", the CAs "
                   "that client certificates must chain to");
  }
  if (r.Has("client_ca") && out.client_cert == ClientCertMode::kNone) {
    r.errors().Add(*r.Find("client_ca"),
                   "\"client_ca\" is set but no client certificate is asked for: add "
                   "client_cert = \"require\" or \"optional\"");
  }
  if (r.Has("client_crl") && !r.Has("client_ca")) {
    r.errors().Add(*r.Find("client_crl"), "\"client_crl\" needs \"client_ca\"");
  }
}

// One certificate of a listener's "tls"; `options`, when not null, also
// takes the listener-wide keys (the table form, or the array's first table).
std::optional<CertificateConfig> ReadCertificate(const toml::value& v, ErrorList& errors,
                                                 ListenerTlsConfig* options) {
  if (!v.is_table()) {
    errors.Add(v, fmt::format("\"tls\" must be a table {{ cert = \"...\", key = \"...\" }}; got {}",
                              DescribeType(v)));
    return std::nullopt;
  }
  TableReader r(v, errors);
  const toml::value* cert = r.Require("cert");
  const toml::value* key = r.Require("key");
  if (options != nullptr) ReadListenerTls(r, *options);
  r.Finish();
  if (cert == nullptr || key == nullptr) return std::nullopt;
  auto cert_file = ReadString(*cert, "cert", errors);
  auto key_file = ReadString(*key, "key", errors);
  if (!cert_file || !key_file) return std::nullopt;
  CheckReadable(*cert, *cert_file, "certificate", errors);
  CheckReadable(*key, *key_file, "private key", errors);
  return CertificateConfig{*cert_file, *key_file};
}

void ReadListener(TableReader r, std::vector<ListenerConfig>& out) {
  ListenerConfig l;
  if (r.Require("address") != nullptr) {
    if (auto a = r.Address("address")) l.address = *a;
  }
  if (const toml::value* tls = r.Find("tls")) {
    // One certificate as a table, or several (chosen by SNI) as an array.
    if (tls->is_array()) {
      // The listener-wide keys go in the first table.
      for (const toml::value& item : tls->as_array()) {
        ListenerTlsConfig* options = &item == &tls->as_array().front() ? &l.tls_options : nullptr;
        if (auto c = ReadCertificate(item, r.errors(), options)) l.certificates.push_back(*c);
      }
      if (tls->as_array().empty()) r.errors().Add(*tls, "\"tls\" lists no certificate");
    } else if (auto c = ReadCertificate(*tls, r.errors(), &l.tls_options)) {
      l.certificates.push_back(*c);
    }
  }
  if (auto v = r.Bool("http2")) l.http2 = *v;
  r.Finish();
  out.push_back(std::move(l));
}

void ReadDecision(TableReader r, std::optional<DecisionConfig>& out) {
  DecisionConfig d;
  if (r.Require("address") != nullptr) {
    if (auto a = r.Address("address")) d.listener.address = *a;
  }
  if (const toml::value* tls = r.Find("tls")) {
    if (auto c = ReadCertificate(*tls, r.errors(), &d.listener.tls_options)) {
      d.listener.certificates.push_back(*c);
    }
  }
  if (const toml::value* allow = r.Find("allow")) {
    d.allow = ReadCidrs(*allow, "allow", r.errors());
    if (allow->is_array() && allow->as_array().empty()) {
      r.errors().Add(*allow, "\"allow\" lists no network: leave it out to accept any address");
    }
  }
  if (auto s = r.Integer("deny_status", 400, 599)) d.deny_status = static_cast<unsigned>(*s);
  r.Finish();
  out = std::move(d);
}

void ReadAdmin(TableReader r, AdminConfig& out) {
  if (auto a = r.Address("address")) out.address = *a;
  if (auto m = r.Bool("metrics")) out.metrics = *m;
  if (auto token = ReadSecret(r, "token_env", "token_file")) {
    if (token->size() < kMinAdminTokenBytes) {
      r.errors().Add(*r.Find(r.Has("token_file") ? "token_file" : "token_env"),
                     fmt::format("the admin token must be at least {} bytes; got {}",
                                 kMinAdminTokenBytes, token->size()));
    } else {
      out.token = std::move(*token);
    }
  }
  r.Finish();
}

void ReadTimeouts(TableReader r, TimeoutsConfig& out) {
  if (auto v = r.DurationMs("client_header", 1)) out.client_header_ms = *v;
  if (auto v = r.DurationMs("client_idle", 1)) out.client_idle_ms = *v;
  if (auto v = r.DurationMs("client_body", 1)) out.client_body_ms = *v;
  if (auto v = r.DurationMs("upstream_connect", 1)) out.upstream_connect_ms = *v;
  if (auto v = r.DurationMs("upstream_response", 1)) out.upstream_response_ms = *v;
  if (auto v = r.DurationMs("request", 1)) out.request_ms = *v;
  if (auto v = r.DurationMs("websocket_idle", 1)) out.websocket_idle_ms = *v;
  r.Finish();
}

void ReadLimits(TableReader r, LimitsConfig& out) {
  if (auto v = r.Integer("max_header_bytes", 1024, 1 << 20)) out.max_header_bytes = *v;
  if (auto v = r.Integer("max_body_bytes", 0, kMaxInt)) out.max_body_bytes = *v;
  if (auto v = r.Integer("max_waiting", 0, 10'000'000)) out.max_waiting = *v;
  if (auto v = r.Integer("max_connections", 1, 10'000'000)) out.max_connections = *v;
  if (auto v = r.Integer("max_concurrent_streams", 1, 100'000)) out.max_concurrent_streams = *v;
  if (auto v = r.Integer("max_websocket_message_bytes", 1, kMaxInt)) {
    out.max_websocket_message_bytes = *v;
  }
  r.Finish();
}

void ReadLog(TableReader r, LogConfig& out) {
  if (auto v = r.String("access")) out.access = *v;
  if (auto v = r.OneOf("format", {"combined", "json"})) {
    out.format = *v == "json" ? LogFormat::kJson : LogFormat::kCombined;
  }
  if (auto v = r.OneOf("level", {"trace", "debug", "info", "warn", "error", "critical", "off"})) {
    out.level = *v;
  }
  r.Finish();
}

void ReadUpstreamTls(const toml::value& v, UpstreamTlsConfig& out, ErrorList& errors) {
  if (!v.is_table()) {
    errors.Add(v, fmt::format("\"tls\" must be a table; got {}", DescribeType(v)));
    return;
  }
  TableReader r(v, errors);
  if (auto b = r.Bool("verify")) out.verify = *b;
  if (auto s = r.String("ca_file")) {
    out.ca_file = *s;
    CheckReadable(*r.Find("ca_file"), *s, "CA file", errors);
  }
  if (auto s = r.String("sni")) out.sni = *s;
  r.Finish();
}

void ReadUpstream(TableReader r, std::vector<UpstreamConfig>& out) {
  UpstreamConfig u;
  if (r.Require("name") != nullptr) {
    if (auto v = r.String("name")) u.name = *v;
  }
  if (const toml::value* servers = r.Require("servers")) {
    if (auto list = r.Strings("servers")) {
      for (std::size_t i = 0; i < list->size(); ++i) {
        auto hp = ParseHostPort((*list)[i]);
        if (hp && hp->port != 0) {
          u.servers.push_back(*hp);
        } else {
          r.errors().Add(
              servers->as_array()[i],
              fmt::format("upstream server must be \"host:port\"; got \"{}\"", (*list)[i]));
        }
      }
      if (list->empty()) r.errors().Add(*servers, "\"servers\" lists no server");
    }
  }
  if (auto v = r.DurationMs("fail_timeout")) u.fail_timeout_ms = *v;
  if (auto v = r.Integer("max_idle", 0, 100000)) u.max_idle = *v;
  if (auto v = r.DurationMs("idle_timeout", 1)) u.idle_timeout_ms = *v;
  if (const toml::value* tls = r.Find("tls")) {
    u.tls.emplace();
    ReadUpstreamTls(*tls, *u.tls, r.errors());
  }
  if (auto protocol = r.OneOf("protocol", {"http1", "h2", "h2c"})) {
    if (*protocol == "h2") {
      u.protocol = UpstreamProtocol::kH2;
      if (!u.tls) {
        r.errors().Add(*r.Find("protocol"),
                       "protocol = \"h2\" is HTTP/2 over TLS: it needs \"tls\" (tls = {} for the "
                       "defaults); cleartext HTTP/2 is \"h2c\"");
      }
    } else if (*protocol == "h2c") {
      u.protocol = UpstreamProtocol::kH2c;
      if (u.tls) {
        r.errors().Add(*r.Find("protocol"),
                       "protocol = \"h2c\" is cleartext HTTP/2: it takes no \"tls\"; HTTP/2 over "
                       "TLS is \"h2\"");
      }
    }
  }
  if (auto b = r.Bool("learn_limits")) u.learn_limits = *b;
  if (auto bucket = r.String("learn_bucket")) {
    if (*bucket == "route") {
      u.learn_bucket = LearnBucket::kRoute;
    } else if (*bucket == "upstream") {
      u.learn_bucket = LearnBucket::kUpstream;
    } else if (!bucket->empty() && bucket->front() == '/') {
      u.learn_bucket = LearnBucket::kPattern;
      for (std::size_t at = 1; at <= bucket->size();) {
        const std::size_t end = std::min(bucket->find('/', at), bucket->size());
        u.learn_pattern.push_back(bucket->substr(at, end - at));
        at = end + 1;
      }
    } else {
      r.errors().Add(*r.Find("learn_bucket"),
                     fmt::format("\"learn_bucket\" must be \"route\", \"upstream\" or a path "
                                 "pattern such as \"/channels/{{id}}/messages\"; got \"{}\"",
                                 *bucket));
    }
  }
  if (auto d = r.DurationMs("learn_max_delay")) u.learn_max_delay_ms = *d;
  if (!u.learn_limits) {
    for (const char* key : {"learn_bucket", "learn_max_delay"}) {
      if (const toml::value* v = r.Find(key)) {
        r.errors().Add(*v, fmt::format("\"{}\" needs learn_limits = true", key));
      }
    }
  }
  if (auto n = r.Integer("max_connections", 1, 10'000'000)) u.max_connections = *n;
  if (auto s = r.Integer("max_connections_status", 400, 599)) {
    u.max_connections_status = static_cast<unsigned>(*s);
  }
  if (auto d = r.DurationMs("max_connections_delay")) u.max_connections_delay_ms = *d;
  if (u.max_connections == 0) {
    for (const char* key : {"max_connections_status", "max_connections_delay"}) {
      if (const toml::value* v = r.Find(key)) {
        r.errors().Add(*v, fmt::format("\"{}\" needs max_connections", key));
      }
    }
  }
  for (const UpstreamConfig& other : out) {
    if (!u.name.empty() && other.name == u.name) {
      r.errors().Add(*r.Find("name"), fmt::format("upstream \"{}\" is defined twice", u.name));
    }
  }
  r.Finish();
  out.push_back(std::move(u));
}

void ReadRoute(TableReader r, const std::vector<UpstreamConfig>& upstreams,
               std::vector<RouteConfig>& out) {
  RouteConfig route;
  if (auto v = r.String("path_prefix")) {
    if (v->empty() || v->front() != '/') {
      r.errors().Add(*r.Find("path_prefix"),
                     fmt::format("\"path_prefix\" must start with \"/\"; got \"{}\"", *v));
    } else if (!CanonicalPathPrefix(*v, route.path_prefix)) {
      r.errors().Add(*r.Find("path_prefix"), fmt::format(kNotCanonicalPath, *v));
    }
  }
  if (auto v = r.String("host")) {
    if (!CanonicalHost(*v, route.host)) r.errors().Add(*r.Find("host"), fmt::format(kNotAHost, *v));
  }
  if (auto v = r.String("name")) route.name = *v;
  if (auto v = r.Bool("websocket")) route.websocket = *v;
  if (route.name.empty()) route.name = route.host + route.path_prefix;
  if (const toml::value* up = r.Require("upstream")) {
    if (auto name = ReadString(*up, "upstream", r.errors())) {
      route.upstream = *name;
      auto it = std::find_if(upstreams.begin(), upstreams.end(),
                             [&](const UpstreamConfig& u) { return u.name == *name; });
      if (it == upstreams.end()) {
        r.errors().Add(*up, fmt::format("no [[upstreams]] is named \"{}\"", *name));
      } else {
        route.upstream_index = static_cast<std::size_t>(it - upstreams.begin());
      }
    }
  }
  r.Finish();
  out.push_back(std::move(route));
}

// Calls `read` for each table of an array of tables (`[[name]]`).
template <typename Fn>
void ForEachTable(TableReader& root, std::string_view key, Fn read) {
  const toml::value* v = root.Find(key);
  if (v == nullptr) return;
  if (!v->is_array()) {
    root.errors().Add(*v, fmt::format("\"{}\" must be an array of tables ([[{}]]); got {}", key,
                                      key, DescribeType(*v)));
    return;
  }
  for (const toml::value& item : v->as_array()) {
    if (!item.is_table()) {
      root.errors().Add(
          item, fmt::format("each [[{}]] entry must be a table; got {}", key, DescribeType(item)));
      continue;
    }
    read(TableReader(item, root.errors()));
  }
}

template <typename Fn>
void ForTable(TableReader& root, std::string_view key, Fn read) {
  const toml::value* v = root.Find(key);
  if (v == nullptr) return;
  if (!v->is_table()) {
    root.errors().Add(
        *v, fmt::format("\"{}\" must be a table ([{}]); got {}", key, key, DescribeType(*v)));
    return;
  }
  read(TableReader(*v, root.errors()));
}

// Every listening address of the file (the listeners', the decision
// service's and the admin API's) is bound by one socket group only: the
// second naming of an address is an error at its position. Port 0 is a new
// port at every bind. The same address written otherwise (0.0.0.0 beside
// 127.0.0.1) is refused when the listeners are bound.
void CheckDistinctAddresses(const toml::value& root, ErrorList& errors) {
  std::vector<const toml::value*> addresses;
  const auto add = [&addresses](const toml::value& table) {
    if (table.is_table() && table.contains("address")) addresses.push_back(&table.at("address"));
  };
  if (root.contains("listeners") && root.at("listeners").is_array()) {
    for (const toml::value& l : root.at("listeners").as_array()) add(l);
  }
  for (const char* section : {"decision", "admin"}) {
    if (root.contains(section)) add(root.at(section));
  }
  std::map<std::string, const toml::value*> seen;
  for (const toml::value* a : addresses) {
    if (!a->is_string()) continue;
    const std::optional<HostPort> address = ParseHostPort(a->as_string().str);
    if (!address || address->port == 0) continue;
    const auto [first, inserted] = seen.emplace(address->ToString(), a);
    if (!inserted) {
      errors.Add(*a, fmt::format("address {} is already used at line {}: every listener, the "
                                 "decision service and the admin API need addresses of their own",
                                 address->ToString(), first->second->location().line()));
    }
  }
}

LoadResult Build(const toml::value& root_value, const std::string& name) {
  ErrorList errors;
  Config config;
  config.path = name;
  TableReader root(root_value, errors);
  ForTable(root, "server", [&](TableReader r) { ReadServer(std::move(r), config.server); });
  ForEachTable(root, "listeners",
               [&](TableReader r) { ReadListener(std::move(r), config.listeners); });
  ForTable(root, "admin", [&](TableReader r) { ReadAdmin(std::move(r), config.admin); });
  ForTable(root, "timeouts", [&](TableReader r) { ReadTimeouts(std::move(r), config.timeouts); });
  ForTable(root, "limits", [&](TableReader r) { ReadLimits(std::move(r), config.limits); });
  ForTable(root, "log", [&](TableReader r) { ReadLog(std::move(r), config.log); });
  ForEachTable(root, "upstreams",
               [&](TableReader r) { ReadUpstream(std::move(r), config.upstreams); });
  ForEachTable(root, "routes",
               [&](TableReader r) { ReadRoute(std::move(r), config.upstreams, config.routes); });
  ForTable(root, "identity", [&](TableReader r) { ReadIdentity(std::move(r), config.identity); });
  ForTable(root, "store", [&](TableReader r) { ReadStore(std::move(r), config.store); });
  ForTable(root, "decision", [&](TableReader r) { ReadDecision(std::move(r), config.decision); });
  ForEachTable(root, "rules",
               [&](TableReader r) { ReadRule(std::move(r), config.store, config.rules); });
  ShareStoreKeys(config.store, config.rules);
  root.Finish();
  CheckDistinctAddresses(root_value, errors);
  // A decision service alone (Envoy's rate-limit service, /check) needs no
  // listener of its own nor anywhere to forward to.
  if (config.listeners.empty() && !config.decision) {
    errors.Add(ConfigError{name, 1, 1,
                           "no [[listeners]] and no [decision]: tollgate needs at least one "
                           "address to serve"});
  }
  if (config.routes.empty() && !config.listeners.empty()) {
    errors.Add(ConfigError{name, 1, 1, "no [[routes]]: requests would have nowhere to go"});
  }
  LoadResult result;
  result.errors = errors.errors();
  std::stable_sort(result.errors.begin(), result.errors.end(),
                   [](const ConfigError& a, const ConfigError& b) {
                     return std::tie(a.line, a.column) < std::tie(b.line, b.column);
                   });
  if (result.errors.empty()) result.config = std::move(config);
  return result;
}

// toml11's own message is multi-line; the first line, without its "[error]"
// tag and parser function name, is what a user needs. Some errors leave that
// line empty ("toml::parse_boolean: ", found by fuzz/config.cc: the user saw
// "file:2:1: " and nothing else) and say what is wrong only under the caret
// ("^--- the next token is not a boolean"): then that is the message.
std::string FirstLine(const std::string& what) {
  std::string line = what.substr(0, what.find('\n'));
  for (std::string_view tag : {"[error] "}) {
    if (line.rfind(tag, 0) == 0) line.erase(0, tag.size());
  }
  const std::size_t colon = line.find(": ");
  if (line.rfind("toml::", 0) == 0 && colon != std::string::npos) line.erase(0, colon + 2);
  if (line.find_first_not_of(' ') == std::string::npos) {
    constexpr std::string_view kCaret = "^--- ";
    const std::size_t caret = what.find(kCaret);
    line = caret == std::string::npos
               ? std::string()
               : what.substr(caret + kCaret.size(), what.find('\n', caret) - caret - kCaret.size());
  }
  if (line.find_first_not_of(' ') == std::string::npos) line = "syntax error";
  return line;
}

// The first 12 hex digits of the text's SHA-256.
std::string Digest(std::string_view text) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  return fmt::format("{:02x}", fmt::join(digest, digest + 6, ""));
}

LoadResult Parse(std::istream& in, const std::string& name) {
  try {
    return Build(toml::parse(in, name), name);
  } catch (const toml::syntax_error& e) {
    const toml::source_location loc = e.location();
    return {std::nullopt, {{name, loc.line(), loc.column(), FirstLine(e.what())}}};
  } catch (const std::exception& e) {
    return {std::nullopt, {{name, 0, 0, e.what()}}};
  }
}

}  // namespace

LoadResult LoadConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return {std::nullopt,
            {{path, 0, 0, fmt::format("cannot read {}: {}", path, std::strerror(errno))}}};
  }
  std::ostringstream text;
  text << in.rdbuf();
  return LoadConfigText(text.str(), path);
}

LoadResult LoadConfigText(std::string_view text, const std::string& name) {
  std::istringstream in{std::string(text)};
  LoadResult result = Parse(in, name);
  if (result.config) result.config->digest = Digest(text);
  return result;
}

}  // namespace tollgate::rules
