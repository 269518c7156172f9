#include "rules/rules_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

#include "algorithms/lease.h"
#include "algorithms/validate.h"
#include "rules/client_certificate.h"
#include "rules/normalize.h"
#include "rules/rule_set.h"

namespace tollgate::rules {
namespace {

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::optional<std::string> ReadFileText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A string or an array of strings.
std::optional<std::vector<std::string>> StringOrStrings(const toml::value& v, std::string_view name,
                                                        ErrorList& errors) {
  if (v.is_string()) return std::vector<std::string>{v.as_string().str};
  if (!v.is_array()) {
    errors.Add(v, fmt::format("\"{}\" must be a string or an array of strings; got {}", name,
                              DescribeType(v)));
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (const toml::value& item : v.as_array()) {
    auto s = ReadString(item, name, errors);
    if (!s) return std::nullopt;
    out.push_back(*s);
  }
  return out;
}

// `match`, or the `not` table inside it (same conditions, no further `not`).
enum class MatchTable { kMatch, kNot };

// The RLS conditions of `match`: `domain = "edge"` and `descriptor = {
// key = "value" | "*" }`. A rule with them decides RLS descriptors only, so
// the HTTP request's conditions have no meaning next to them.
void ReadDescriptorMatch(TableReader& r, RuleMatch& out, ErrorList& errors) {
  if (auto s = r.String("domain")) {
    out.domain = *s;
    if (s->empty()) errors.Add(*r.Find("domain"), "\"domain\" must not be empty");
  }
  if (const toml::value* d = r.Find("descriptor")) {
    if (!d->is_table() || d->as_table().empty()) {
      errors.Add(*d, fmt::format("\"descriptor\" must be a table of entries {{ key = \"value\" "
                                 "}} (\"*\" takes any value); got {}",
                                 d->is_table() ? "an empty table" : DescribeType(*d)));
    } else {
      for (const auto& [key, value] : d->as_table()) {
        if (!value.is_table()) {
          if (auto s = ReadString(value, key, errors)) out.descriptor.emplace_back(key, *s);
          continue;
        }
        // { not = ["a", "b"] }: any value but these.
        const toml::value* values =
            value.as_table().size() == 1 && value.contains("not") ? &value.at("not") : nullptr;
        auto list = values != nullptr && values->is_array() && !values->as_array().empty()
                        ? StringOrStrings(*values, "not", errors)
                        : std::nullopt;
        if (!list) {
          errors.Add(value, fmt::format("\"{}\" must be a value, \"*\" or {{ not = [\"value\", "
                                        "...] }}",
                                        key));
          continue;
        }
        out.descriptor.emplace_back(key, "*");
        out.descriptor_except.emplace_back(key, std::move(*list));
      }
      std::sort(out.descriptor.begin(), out.descriptor.end());
      std::sort(out.descriptor_except.begin(), out.descriptor_except.end());
    }
  }
  // Even an empty or malformed domain/descriptor (reported above) makes
  // this an RLS rule: its other errors are those of one.
  if (!r.Has("domain") && !r.Has("descriptor")) return;
  for (const char* key :
       {"path_prefix", "methods", "role", "ip", "host", "header", "anonymous", "not"}) {
    if (const toml::value* v = r.Find(key)) {
      errors.Add(*v, fmt::format("\"{}\" has no meaning next to \"domain\"/\"descriptor\": such "
                                 "a rule decides Envoy RLS descriptors, not HTTP requests",
                                 key));
    }
  }
}

void ReadMatch(const toml::value& v, MatchTable which, RuleMatch& out, ErrorList& errors) {
  const std::string_view name = which == MatchTable::kMatch ? "match" : "not";
  if (!v.is_table()) {
    errors.Add(v, fmt::format("\"{}\" must be a table; got {}", name, DescribeType(v)));
    return;
  }
  if (which == MatchTable::kNot && v.as_table().empty()) {
    errors.Add(v, "\"not\" needs at least one condition");
    return;
  }
  TableReader r(v, errors);
  if (auto s = r.String("path_prefix")) {
    if (s->empty() || s->front() != '/') {
      errors.Add(*r.Find("path_prefix"),
                 fmt::format("\"path_prefix\" must start with \"/\"; got \"{}\"", *s));
    } else if (!CanonicalPathPrefix(*s, out.path_prefix)) {
      errors.Add(*r.Find("path_prefix"), fmt::format(kNotCanonicalPath, *s));
    }
  }
  if (const toml::value* m = r.Find("methods")) {
    if (m->is_string()) {
      errors.Add(*m, fmt::format("\"methods\" must be an array of strings; got a string: write "
                                 "methods = [\"{}\"]",
                                 m->as_string().str));
    } else if (auto list = r.Strings("methods")) {
      for (const std::string& method : *list) out.methods.push_back(Upper(method));
    }
  }
  if (const toml::value* roles = r.Find("role")) {
    if (auto list = StringOrStrings(*roles, "role", errors)) out.roles = *list;
  }
  if (const toml::value* ips = r.Find("ip")) out.ips = ReadCidrs(*ips, "ip", errors);
  if (auto s = r.String("host")) {
    if (!CanonicalHost(*s, out.host)) errors.Add(*r.Find("host"), fmt::format(kNotAHost, *s));
  }
  if (const toml::value* h = r.Find("header")) {
    if (!h->is_table()) {
      errors.Add(*h, fmt::format("\"header\" must be a table {{ \"Name\" = \"value\" }}; got {}",
                                 DescribeType(*h)));
    } else {
      for (const auto& [name, value] : h->as_table()) {
        auto s = ReadString(value, name, errors);
        if (s && CheckHeaderName(value, "each name in \"header\"", name, errors)) {
          out.headers.emplace_back(name, *s);
        }
      }
    }
  }
  if (auto b = r.Bool("anonymous")) out.anonymous = *b;
  if (which == MatchTable::kMatch) ReadDescriptorMatch(r, out, errors);
  if (const toml::value* n = r.Find("not")) {
    if (which == MatchTable::kNot) {
      errors.Add(*n, "\"not\" cannot hold another \"not\"");
    } else {
      auto excluded = std::make_shared<RuleMatch>();
      ReadMatch(*n, MatchTable::kNot, *excluded, errors);
      out.exclude = std::move(excluded);
    }
  }
  r.Finish();
}

std::optional<std::vector<KeyPart>> ReadKey(const toml::value& v, ErrorList& errors) {
  auto list = StringOrStrings(v, "key", errors);
  if (!list) return std::nullopt;
  std::vector<KeyPart> parts;
  for (const std::string& text : *list) {
    KeyPart part;
    if (text == "ip") {
      part.kind = KeyPartKind::kIp;
    } else if (text == "user") {
      part.kind = KeyPartKind::kUser;
    } else if (text == "role") {
      part.kind = KeyPartKind::kRole;
    } else if (text == "global") {
      part.kind = KeyPartKind::kGlobal;
    } else if (text == "route") {
      part.kind = KeyPartKind::kRoute;
    } else if (text == "descriptor") {
      part.kind = KeyPartKind::kDescriptor;
    } else if (text.rfind("header:", 0) == 0 && text.size() > 7) {
      part.kind = KeyPartKind::kHeader;
      part.header = text.substr(7);
      if (!CheckHeaderName(v, "the NAME of \"header:NAME\" in \"key\"", part.header, errors)) {
        return std::nullopt;
      }
    } else {
      errors.Add(v, fmt::format("\"key\" parts must be \"ip\", \"user\", \"role\", \"global\", "
                                "\"route\", \"header:NAME\" or \"descriptor\"; got \"{}\"",
                                text));
      return std::nullopt;
    }
    parts.push_back(part);
  }
  if (parts.empty()) {
    errors.Add(v, "\"key\" names no part");
    return std::nullopt;
  }
  return parts;
}

std::optional<std::pair<std::int64_t, WindowLabel>> ReadWindow(const toml::value& table,
                                                               ErrorList& errors) {
  TableReader r(table, errors);
  const toml::value* limit = r.Require("limit");
  const toml::value* window = r.Require("window");
  std::optional<std::int64_t> l = r.Integer("limit", 1, std::numeric_limits<std::int64_t>::max());
  std::optional<std::int64_t> w = r.DurationMs("window", 1);
  r.Finish();
  if (limit == nullptr || window == nullptr || !l || !w) return std::nullopt;
  return std::pair{*l, WindowLabel{window->as_string().str, std::max<std::int64_t>(1, *w / 1000)}};
}

}  // namespace

std::vector<Cidr> ReadCidrs(const toml::value& v, std::string_view name, ErrorList& errors) {
  std::vector<Cidr> out;
  auto list = StringOrStrings(v, name, errors);
  if (!list) return out;
  const toml::value* items = v.is_array() ? nullptr : &v;
  for (std::size_t i = 0; i < list->size(); ++i) {
    std::string problem;
    if (auto c = Cidr::Parse((*list)[i], problem)) {
      out.push_back(*c);
    } else {
      errors.Add(items != nullptr ? *items : v.as_array()[i],
                 fmt::format("\"{}\" must list CIDRs such as \"10.0.0.0/8\" or \"::1/128\": {}",
                             name, problem));
    }
  }
  return out;
}

std::optional<std::string> ReadSecret(TableReader& r, std::string_view env_key,
                                      std::string_view file_key) {
  std::optional<std::string> secret;
  if (auto env = r.String(env_key)) {
    const char* value = std::getenv(env->c_str());
    if (value == nullptr || *value == '\0') {
      r.errors().Add(*r.Find(env_key), fmt::format("environment variable {} is not set", *env));
    } else {
      secret = value;
    }
  }
  if (auto file = r.String(file_key)) {
    auto text = ReadFileText(*file);
    if (!text) {
      r.errors().Add(*r.Find(file_key), fmt::format("cannot read \"{}\"", *file));
    } else {
      while (!text->empty() && (text->back() == '\n' || text->back() == '\r')) text->pop_back();
      secret = std::move(*text);
    }
  }
  return secret;
}

namespace {

ClientCertIdentityConfig ReadClientCertIdentity(TableReader r) {
  ClientCertIdentityConfig c;
  if (auto u = r.OneOf("user", {"subject_cn", "san_uri", "san_dns", "sha256"})) {
    c.user = *u == "subject_cn" ? CertificateUser::kSubjectCn
             : *u == "san_uri"  ? CertificateUser::kSanUri
             : *u == "san_dns"  ? CertificateUser::kSanDns
                                : CertificateUser::kSha256;
  }
  if (auto role = r.String("role")) {
    constexpr std::string_view kPrefix = "subject_";
    const std::string attribute = role->rfind(kPrefix, 0) == 0 ? role->substr(kPrefix.size()) : "";
    if (!IsKnownSubjectAttribute(attribute)) {
      r.errors().Add(*r.Find("role"),
                     fmt::format("\"role\" must be a subject attribute: \"subject_ou\", "
                                 "\"subject_o\", \"subject_cn\", \"subject_title\", ...; got "
                                 "\"{}\"",
                                 *role));
    } else {
      c.role_attribute = attribute;
    }
  }
  if (auto h = r.HeaderName("subject_header")) c.subject_header = *h;
  if (auto h = r.HeaderName("sha256_header")) c.sha256_header = *h;
  r.Finish();
  return c;
}

}  // namespace

void ReadIdentity(TableReader r, IdentityConfig& out) {
  if (const toml::value* v = r.Find("trusted_proxies")) {
    out.trusted_proxies = ReadCidrs(*v, "trusted_proxies", r.errors());
  }
  if (auto s = r.HeaderName("user_header")) out.user_header = *s;
  if (auto s = r.HeaderName("role_header")) out.role_header = *s;
  if (auto n = r.Integer("ipv6_prefix", 1, 128)) out.ipv6_prefix = static_cast<int>(*n);
  if (const toml::value* jwt = r.Find("jwt")) {
    if (!jwt->is_table()) {
      r.errors().Add(*jwt, fmt::format("\"jwt\" must be a table; got {}", DescribeType(*jwt)));
    } else {
      JwtConfig j;
      TableReader jr(*jwt, r.errors());
      if (auto a = jr.OneOf("algorithm", {"HS256", "RS256", "ES256"})) {
        j.algorithm = *a == "HS256"   ? JwtAlgorithm::kHs256
                      : *a == "RS256" ? JwtAlgorithm::kRs256
                                      : JwtAlgorithm::kEs256;
      }
      if (auto secret = ReadSecret(jr, "secret_env", "secret_file")) j.secret = *secret;
      if (auto file = jr.String("public_key_file")) {
        auto text = ReadFileText(*file);
        if (!text) {
          r.errors().Add(*jr.Find("public_key_file"), fmt::format("cannot read \"{}\"", *file));
        } else {
          j.public_key_pem = *text;
        }
      }
      if (auto s = jr.String("user_claim")) j.user_claim = *s;
      if (auto s = jr.String("role_claim")) j.role_claim = *s;
      if (auto d = jr.DurationMs("leeway")) j.leeway_ms = *d;
      if (auto s = jr.OneOf("on_invalid", {"anonymous", "reject"})) {
        j.on_invalid = *s == "reject" ? OnInvalidToken::kReject : OnInvalidToken::kAnonymous;
      }
      const bool hmac = j.algorithm == JwtAlgorithm::kHs256;
      if (hmac && j.secret.empty() && !jr.Has("secret_env") && !jr.Has("secret_file")) {
        r.errors().Add(*jwt, "HS256 needs \"secret_env\" or \"secret_file\"");
      }
      if (!hmac && !jr.Has("public_key_file")) {
        r.errors().Add(*jwt, "RS256 and ES256 need \"public_key_file\"");
      }
      jr.Finish();
      out.jwt = j;
    }
  }
  if (const toml::value* cert = r.Find("client_cert")) {
    if (!cert->is_table()) {
      r.errors().Add(*cert,
                     fmt::format("\"client_cert\" must be a table; got {}", DescribeType(*cert)));
    } else {
      out.client_cert = ReadClientCertIdentity(TableReader(*cert, r.errors()));
    }
  }
  r.Finish();
}

void ReadRedis(TableReader r, StoreConfig& out) {
  store::RedisOptions& redis = out.redis;
  if (const toml::value* url = r.Find("url")) {
    if (auto text = ReadString(*url, "url", r.errors())) {
      std::string error;
      if (auto address = store::ParseRedisUrl(*text, error)) {
        redis.address = *address;
      } else {
        r.errors().Add(*url, error);
      }
    }
  }
  if (const toml::value* nodes = r.Find("nodes")) {
    // Redis Cluster seeds: "host:port" or redis:// URLs (credentials: the first's).
    if (!nodes->is_array() || nodes->as_array().empty()) {
      r.errors().Add(*nodes, "\"nodes\" must be a non-empty array of \"host:port\" strings");
    } else {
      if (r.Has("url")) {
        r.errors().Add(*nodes, "use either \"url\" (one Redis) or \"nodes\" (Redis Cluster)");
      }
      for (const toml::value& node : nodes->as_array()) {
        auto text = ReadString(node, "nodes", r.errors());
        if (!text) continue;
        std::string error;
        const std::string url = text->starts_with("redis://") ? *text : "redis://" + *text;
        if (auto address = store::ParseRedisUrl(url, error)) {
          if (address->db != 0) {
            r.errors().Add(node, "Redis Cluster has database 0 only");
          }
          redis.nodes.push_back(*address);
        } else {
          r.errors().Add(node, error);
        }
      }
    }
  }
  if (auto prefix = r.String("prefix")) redis.prefix = *prefix;
  if (auto ms = r.DurationMs("timeout", 1)) redis.timeout_ms = *ms;
  if (auto n = r.Integer("pool", 1, 64)) redis.pool = static_cast<std::size_t>(*n);
  if (auto n = r.Integer("max_pending", 1, 1'000'000)) {
    redis.max_pending = static_cast<std::size_t>(*n);
  }
  if (auto n = r.Integer("batch", 1, static_cast<std::int64_t>(store::RedisOptions::kMaxBatch))) {
    redis.batch = static_cast<std::size_t>(*n);
  }
  if (auto policy = r.OneOf("on_error", {"allow", "deny", "local", "share"})) {
    out.on_error = *policy == "allow"   ? StoreFailurePolicy::kAllow
                   : *policy == "deny"  ? StoreFailurePolicy::kDeny
                   : *policy == "share" ? StoreFailurePolicy::kShare
                                        : StoreFailurePolicy::kLocal;
  }
  if (auto time = r.OneOf("time", {"server", "client"})) {
    redis.time = *time == "server" ? store::RedisTime::kServer : store::RedisTime::kClient;
  }
  if (auto ms = r.DurationMs("inflight_ttl", 1)) redis.inflight_ttl_ms = *ms;
  r.Finish();
}

void ReadStore(TableReader r, StoreConfig& out) {
  if (auto kind = r.OneOf("kind", {"local", "redis"})) {
    out.kind = *kind == "redis" ? StoreKind::kRedis : StoreKind::kLocal;
  }
  if (auto n = r.Integer("max_keys", 1, std::int64_t{1} << 32)) {
    out.max_keys = static_cast<std::size_t>(*n);
  }
  if (const toml::value* redis = r.Find("redis")) {
    if (!redis->is_table()) {
      r.errors().Add(*redis,
                     fmt::format("\"redis\" must be a table; got {}", DescribeType(*redis)));
    } else {
      ReadRedis(TableReader(*redis, r.errors()), out);
    }
  }
  r.Finish();
}

namespace {

// Rules that keep keys in the local store: rate rules (not exempt, no
// max_inflight).
bool UsesLocalStore(const RuleConfig& rule) { return !rule.exempt && rule.max_inflight == 0; }

// The keys `rules` need of the local store: their own max_keys, and a key at
// least for each rule without one (while read, a rule's max_keys is its own
// or 0).
std::uint64_t KeysNeeded(const std::vector<RuleConfig>& rules) {
  std::uint64_t n = 0;
  for (const RuleConfig& rule : rules) {
    if (UsesLocalStore(rule)) n += std::max<std::size_t>(1, rule.max_keys);
  }
  return n;
}

// An RLS rule (domain/descriptor) keys on its descriptors ("descriptor",
// "global"): an RLS call has no user, route or headers of the client, and
// its peer is the proxy. An HTTP rule has no descriptor to key on. Neither
// concurrency nor per-message limits have a meaning for RLS. `match` is the
// rule's match table, if any: one that names a domain or descriptor makes
// an RLS rule even when they were malformed (and reported).
void CheckDescriptorKey(const RuleConfig& rule, const toml::value* match, const toml::value& key,
                        TableReader& r, ErrorList& errors) {
  const bool rls =
      rule.match.ForDescriptors() ||
      (match != nullptr && match->is_table() &&
       (match->as_table().count("domain") != 0 || match->as_table().count("descriptor") != 0));
  for (const KeyPart& part : rule.key) {
    if (rls && part.kind != KeyPartKind::kDescriptor && part.kind != KeyPartKind::kGlobal) {
      errors.Add(key, fmt::format("key part \"{}\" has no meaning in a rule with "
                                  "\"domain\"/\"descriptor\": use \"descriptor\" or \"global\"",
                                  KeyPartName(part)));
    }
    if (!rls && part.kind == KeyPartKind::kDescriptor) {
      errors.Add(key,
                 "key part \"descriptor\" needs match.domain or match.descriptor: only Envoy "
                 "RLS calls have descriptors");
    }
  }
  if (!rls) return;
  for (const char* name : {"max_inflight", "per"}) {
    if (const toml::value* v = r.Find(name)) {
      errors.Add(
          *v, fmt::format("\"{}\" has no meaning in a rule with \"domain\"/\"descriptor\"", name));
    }
  }
}

}  // namespace

namespace {

// sync = "lease": lease_ttl (default 1 s) and lease_max (default a tenth of
// the smallest window's limit, at least 1, at most that limit) into
// `spec.lease`, unless an algorithm cannot lease (errors at `sync`).
void ReadLease(const std::vector<algorithms::LimitParams>& windows,
               std::optional<std::int64_t> ttl_ms, std::optional<std::int64_t> max_units,
               TableReader& r, store::LimitSpec& spec) {
  const toml::value& at = *r.Find("sync");
  for (const algorithms::LimitParams& p : windows) {
    if (std::string_view why = algorithms::LeaseRefusal(p); !why.empty()) {
      r.errors().Add(at, std::string(why));
      return;
    }
  }
  const std::int64_t smallest = algorithms::SmallestLimit(windows);
  store::LimitSpec::Lease lease;
  lease.ttl_ms = ttl_ms.value_or(algorithms::kDefaultLeaseTtlMs);
  lease.max_units = max_units.value_or(algorithms::DefaultLeaseMax(windows));
  if (lease.max_units > smallest) {
    r.errors().Add(*r.Find("lease_max"),
                   fmt::format("\"lease_max\" must be at most the limit ({}): a lease is a "
                               "slice of the budget",
                               smallest));
    return;
  }
  spec.lease = lease;
}

}  // namespace

void ReadRule(TableReader r, const StoreConfig& store, std::vector<RuleConfig>& out) {
  RuleConfig rule;
  ErrorList& errors = r.errors();
  const toml::value* name_value = r.Find("name");
  if (const toml::value* name = r.Require("name")) {
    if (auto s = ReadString(*name, "name", errors)) {
      rule.name = *s;
      if (s->empty()) errors.Add(*name, "\"name\" must not be empty");
      // It is a string in the RateLimit and RateLimit-Policy fields (RFC
      // 8941), which holds printable ASCII only.
      if (!std::all_of(s->begin(), s->end(), [](char c) { return c >= 0x20 && c <= 0x7e; })) {
        errors.Add(*name,
                   "\"name\" must be printable ASCII: it names the rule in the RateLimit header "
                   "fields");
      }
      for (const RuleConfig& other : out) {
        if (other.name == *s) errors.Add(*name, fmt::format("rule \"{}\" is defined twice", *s));
      }
    }
  }
  if (const toml::value* m = r.Find("match")) ReadMatch(*m, MatchTable::kMatch, rule.match, errors);
  if (auto b = r.Bool("exempt")) rule.exempt = *b;
  if (rule.exempt) {
    // An exempt rule only matches: limits, keys and actions do not apply.
    for (const char* key :
         {"key", "algorithm", "limit", "window", "limits", "burst", "sub_windows", "nodelay",
          "cost", "action", "max_delay", "status", "headers", "max_inflight", "max_keys", "per"}) {
      if (const toml::value* v = r.Find(key)) {
        errors.Add(*v, fmt::format("\"{}\" has no meaning in an exempt rule", key));
      }
    }
    r.Finish();
    out.push_back(std::move(rule));
    return;
  }
  if (const toml::value* key = r.Require("key")) {
    if (auto parts = ReadKey(*key, errors)) rule.key = *parts;
    CheckDescriptorKey(rule, r.Find("match"), *key, r, errors);
  }
  if (auto per = r.OneOf("per", {"request", "message"})) {
    rule.per = *per == "message" ? LimitUnit::kMessage : LimitUnit::kRequest;
  }
  if (auto n = r.Integer("max_inflight", 1, 10'000'000)) {
    // A concurrency rule counts requests in flight: no algorithm or window.
    rule.max_inflight = *n;
    if (rule.per == LimitUnit::kMessage) {
      errors.Add(*r.Find("per"),
                 "per = \"message\" has no meaning with max_inflight: a concurrency rule counts "
                 "requests in flight (an open WebSocket tunnel is one)");
    }
    for (const char* key : {"algorithm", "limit", "window", "limits", "burst", "sub_windows",
                            "nodelay", "cost", "action", "headers", "max_keys"}) {
      if (const toml::value* v = r.Find(key)) {
        errors.Add(*v, fmt::format("\"{}\" has no meaning with max_inflight (a concurrency "
                                   "rule); put a rate limit in a rule of its own",
                                   key));
      }
    }
    if (auto s = r.Integer("status", 400, 599)) rule.status = static_cast<unsigned>(*s);
    // With max_delay a request beyond the limit waits for a place.
    if (auto d = r.DurationMs("max_delay", 1)) rule.max_delay_ms = *d;
    if (auto w = r.Integer("max_waiting", 1, 1'000'000)) {
      rule.max_waiting = *w;
      if (!r.Has("max_delay")) {
        errors.Add(*r.Find("max_waiting"), "\"max_waiting\" needs \"max_delay\"");
      }
    }
    r.Finish();
    out.push_back(std::move(rule));
    return;
  }
  r.Require("algorithm");
  auto algorithm_name = r.OneOf("algorithm", algorithms::kAlgorithmNames);
  std::optional<algorithms::Algorithm> algorithm;
  if (algorithm_name) algorithm = algorithms::ParseAlgorithm(*algorithm_name);

  // Windows: `limit` + `window`, or `limits = [ { limit, window }, ... ]`.
  std::vector<std::pair<std::int64_t, WindowLabel>> windows;
  const toml::value* limits_value = r.Find("limits");
  const toml::value* where = limits_value;
  if (limits_value != nullptr) {
    if (r.Has("limit") || r.Has("window")) {
      errors.Add(*limits_value, "use either \"limits\" or \"limit\" and \"window\", not both");
    }
    if (!limits_value->is_array()) {
      errors.Add(*limits_value, fmt::format("\"limits\" must be an array of {{ limit, window }} "
                                            "tables; got {}",
                                            DescribeType(*limits_value)));
    } else {
      for (const toml::value& item : limits_value->as_array()) {
        if (!item.is_table()) {
          errors.Add(item, "each \"limits\" entry must be a table { limit = N, window = \"1m\" }");
          continue;
        }
        if (auto w = ReadWindow(item, errors)) windows.push_back(*w);
      }
    }
  } else {
    where = r.Require("limit");
    const toml::value* window = r.Require("window");
    auto l = r.Integer("limit", 0, std::numeric_limits<std::int64_t>::max());
    auto w = r.DurationMs("window", 1);
    if (where != nullptr && window != nullptr && l && w) {
      windows.push_back(
          {*l, WindowLabel{window->as_string().str, std::max<std::int64_t>(1, *w / 1000)}});
    }
  }
  const bool bucket = algorithm == algorithms::Algorithm::kTokenBucket ||
                      algorithm == algorithms::Algorithm::kLeakyBucket;
  std::optional<std::int64_t> burst = r.Integer("burst", 0, std::int64_t{1} << 40);
  if (burst && algorithm && !bucket) {
    errors.Add(*r.Find("burst"), "\"burst\" applies to token_bucket and leaky_bucket only");
  }
  std::int64_t sub_windows = 10;
  if (auto n = r.Integer("sub_windows", 1, algorithms::kMaxSubWindows)) {
    sub_windows = *n;
    if (algorithm && algorithm != algorithms::Algorithm::kSubWindow) {
      errors.Add(*r.Find("sub_windows"), "\"sub_windows\" applies to sub_window only");
    }
  }
  bool nodelay = false;
  if (auto b = r.Bool("nodelay")) {
    nodelay = *b;
    if (algorithm && algorithm != algorithms::Algorithm::kLeakyBucket) {
      errors.Add(*r.Find("nodelay"), "\"nodelay\" applies to leaky_bucket only");
    }
  }
  if (auto c = r.Integer("cost", 1, std::int64_t{1} << 40)) rule.cost = *c;
  // How the rule's keys are shared by the gateways of one Redis
  // (docs/leases.md): a store call per decision, or leases.
  const toml::value* sync_value = r.Find("sync");
  bool lease = false;
  if (auto sync = r.OneOf("sync", {"exact", "lease"})) {
    lease = *sync == "lease";
    if (lease && store.kind != StoreKind::kRedis) {
      errors.Add(*sync_value,
                 "sync = \"lease\" shares a key's budget between gateways through Redis: it "
                 "needs [store] kind = \"redis\"");
    }
  }
  const std::optional<std::int64_t> lease_ttl = r.DurationMs("lease_ttl", 1);
  const std::optional<std::int64_t> lease_max =
      r.Integer("lease_max", 1, std::numeric_limits<std::int64_t>::max());
  if (!lease) {
    for (const char* key : {"lease_ttl", "lease_max"}) {
      if (const toml::value* v = r.Find(key)) {
        errors.Add(*v, fmt::format("\"{}\" applies to sync = \"lease\" only", key));
      }
    }
  }
  if (auto a = r.OneOf("action", {"reject", "delay", "dry_run"})) {
    rule.action = *a == "delay"     ? RuleAction::kDelay
                  : *a == "dry_run" ? RuleAction::kDryRun
                                    : RuleAction::kReject;
  }
  if (auto d = r.DurationMs("max_delay", 1)) rule.max_delay_ms = *d;
  if (auto n = r.Integer("max_waiting", 1, 1'000'000)) rule.max_waiting = *n;
  if (rule.action == RuleAction::kDelay && !r.Has("max_delay")) {
    errors.Add(*r.Find("action"), "action \"delay\" needs \"max_delay\"");
  }
  if (rule.action != RuleAction::kDelay) {
    for (const char* key : {"max_delay", "max_waiting"}) {
      if (const toml::value* v = r.Find(key)) {
        errors.Add(*v, fmt::format("\"{}\" applies to action = \"delay\" only", key));
      }
    }
  }
  if (rule.per == LimitUnit::kMessage) {
    for (const char* key : {"status", "headers"}) {
      if (const toml::value* v = r.Find(key)) {
        errors.Add(*v, fmt::format("\"{}\" has no meaning with per = \"message\": a limited "
                                   "message closes its WebSocket (1008), no response is sent",
                                   key));
      }
    }
    if (rule.action == RuleAction::kDelay && r.Has("max_waiting")) {
      errors.Add(*r.Find("max_waiting"),
                 "\"max_waiting\" has no meaning with per = \"message\": a held message waits "
                 "in its own tunnel");
    }
  }
  if (auto s = r.Integer("status", 400, 599)) rule.status = static_cast<unsigned>(*s);
  if (auto h = r.OneOf("headers", {"all", "limited", "none"})) {
    rule.headers = *h == "none"      ? RateLimitHeaders::kNone
                   : *h == "limited" ? RateLimitHeaders::kLimited
                                     : RateLimitHeaders::kAll;
  }
  // The rule's own part of [store] max_keys (read before the rules); the
  // rules without one share what is left (ShareStoreKeys).
  if (auto n = r.Integer("max_keys", 1, std::int64_t{1} << 32)) {
    rule.max_keys = static_cast<std::size_t>(*n);
  }
  const std::uint64_t before = KeysNeeded(out);
  const std::uint64_t needed = before + std::max<std::size_t>(1, rule.max_keys);
  if (needed > store.max_keys && before <= store.max_keys) {
    const toml::value* at = r.Has("max_keys") ? r.Find("max_keys") : name_value;
    errors.Add(at != nullptr ? *at : r.table(),
               fmt::format("the rules need {} keys of the local store, more than [store] "
                           "max_keys ({}): their own max_keys, and one key at least for each "
                           "rule without one",
                           needed, store.max_keys));
  }
  if (algorithm && where != nullptr && !windows.empty()) {
    std::vector<algorithms::LimitParams> params;
    for (const auto& [limit, label] : windows) {
      algorithms::LimitParams p;
      p.algorithm = *algorithm;
      p.limit = limit;
      p.window_ms = *ParseDurationMs(label.text);
      p.burst = burst.value_or(*algorithm == algorithms::Algorithm::kTokenBucket ? limit : 0);
      p.sub_windows = sub_windows;
      p.shaping = nodelay ? algorithms::Shaping::kNoDelay : algorithms::Shaping::kDelay;
      params.push_back(p);
      rule.windows.push_back(label);
    }
    if (auto problem = algorithms::ValidateWindows(params)) {
      errors.Add(*where, *problem);
    } else if (params.front().limit == 0 && (lease || rule.action == RuleAction::kDelay)) {
      errors.Add(*where,
                 "limit = 0 refuses every request: it takes neither sync = \"lease\" "
                 "nor action = \"delay\"");
    } else if (auto cost_problem = algorithms::ValidateCost(params, rule.cost)) {
      errors.Add(r.Find("cost") != nullptr ? *r.Find("cost") : *where, *cost_problem);
    } else {
      store::LimitSpec spec = store::LimitSpec::Make(params);
      if (lease && sync_value != nullptr) ReadLease(params, lease_ttl, lease_max, r, spec);
      if (lease && spec.lease) spec.lease->rule = rule.name;
      rule.limit = std::make_shared<const store::LimitSpec>(std::move(spec));
    }
  }
  r.Finish();
  out.push_back(std::move(rule));
}

void ShareStoreKeys(const StoreConfig& store, std::vector<RuleConfig>& rules) {
  std::uint64_t own = 0;
  std::size_t sharing = 0;
  for (const RuleConfig& rule : rules) {
    if (!UsesLocalStore(rule)) continue;
    own += rule.max_keys;
    if (rule.max_keys == 0) ++sharing;
  }
  if (sharing == 0) return;
  const std::uint64_t left = own < store.max_keys ? store.max_keys - own : 0;
  // An even share each; the first rules one key more, so that the shares
  // add up to [store] max_keys.
  std::size_t i = 0;
  for (RuleConfig& rule : rules) {
    if (!UsesLocalStore(rule) || rule.max_keys != 0) continue;
    rule.max_keys = std::max<std::size_t>(1, left / sharing + (i < left % sharing ? 1 : 0));
    ++i;
  }
}

bool operator==(const StoreConfig& a, const StoreConfig& b) {
  const store::RedisOptions& x = a.redis;
  const store::RedisOptions& y = b.redis;
  return a.kind == b.kind && a.max_keys == b.max_keys && a.on_error == b.on_error &&
         x.address.host == y.address.host && x.address.port == y.address.port &&
         x.address.user == y.address.user && x.address.password == y.address.password &&
         x.address.db == y.address.db && x.prefix == y.prefix && x.timeout_ms == y.timeout_ms &&
         x.pool == y.pool && x.time == y.time && x.max_pending == y.max_pending &&
         x.batch == y.batch && x.inflight_ttl_ms == y.inflight_ttl_ms &&
         x.nodes.size() == y.nodes.size() &&
         std::equal(x.nodes.begin(), x.nodes.end(), y.nodes.begin(),
                    [](const store::RedisAddress& m, const store::RedisAddress& n) {
                      return m.host == n.host && m.port == n.port && m.user == n.user &&
                             m.password == n.password;
                    });
}

}  // namespace tollgate::rules
