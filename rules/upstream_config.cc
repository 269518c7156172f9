#include "rules/upstream_config.h"

#include <fmt/format.h>

#include <algorithm>

#include "rules/normalize.h"
#include "rules/wait_config.h"

namespace tollgate::rules {
namespace {

// Whether `v`, the value of `key`, is a table; reported otherwise.
bool IsTable(const toml::value& v, std::string_view key, ErrorList& errors) {
  if (v.is_table()) return true;
  errors.Add(v, fmt::format("\"{}\" must be a table; got {}", key, DescribeType(v)));
  return false;
}

void ReadUpstreamTls(const toml::value& v, const TableSpec& spec, UpstreamTlsConfig& out,
                     ErrorList& errors) {
  if (!IsTable(v, "tls", errors)) return;
  TableReader r(v, spec, errors);
  if (auto b = r.Bool("verify")) out.verify = *b;
  if (auto s = r.String("ca_file")) {
    out.ca_file = *s;
    CheckReadable(*r.Find("ca_file"), *s, "CA file", errors);
  }
  if (auto s = r.String("sni")) out.sni = *s;
  r.Finish();
}

void ReadAdaptive(const toml::value& v, const TableSpec& spec, AdaptiveConcurrencyConfig& out,
                  ErrorList& errors) {
  if (!IsTable(v, "adaptive", errors)) return;
  TableReader r(v, spec, errors);
  if (auto n = r.Integer("min")) out.min = *n;
  if (auto n = r.Integer("max")) out.max = *n;
  if (out.min > out.max) {
    r.errors().Add(r.Find("min") != nullptr ? *r.Find("min") : *r.Find("max"),
                   fmt::format("\"min\" ({}) is above \"max\" ({})", out.min, out.max));
  }
  if (auto n = r.Integer("initial")) {
    out.initial = *n;
    if (*n < out.min || *n > out.max) {
      r.errors().Add(*r.Find("initial"), fmt::format("\"initial\" must be between min ({}) and "
                                                     "max ({}); got {}",
                                                     out.min, out.max, *n));
    }
  } else {
    out.initial = std::clamp(out.initial, out.min, std::max(out.min, out.max));
  }
  if (auto d = r.DurationMs("target_latency")) out.target_latency_ms = *d;
  if (auto n = r.Integer("tolerance_percent")) out.tolerance_percent = *n;
  if (auto d = r.DurationMs("window")) out.window_ms = *d;
  if (auto d = r.DurationMs("probe_interval")) out.probe_interval_ms = *d;
  r.Finish();
}

}  // namespace

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
  if (auto v = r.Integer("max_idle")) u.max_idle = *v;
  if (auto v = r.DurationMs("idle_timeout")) u.idle_timeout_ms = *v;
  if (const toml::value* tls = r.Find("tls")) {
    u.tls.emplace();
    ReadUpstreamTls(*tls, r.TableOf("tls"), *u.tls, r.errors());
  }
  if (auto protocol = r.OneOf("protocol")) {
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
  if (auto c = r.IntegerOrOneOf("concurrency")) {
    if (c->choice.empty()) {
      u.max_connections = c->number;
    } else {
      u.adaptive.emplace();
    }
  }
  if (auto n = r.Integer("max_connections")) {
    if (r.Has("concurrency")) {
      r.errors().Add(*r.Find("max_connections"),
                     "\"max_connections\" is the older name of \"concurrency\": give one of them");
    } else {
      u.max_connections = *n;
    }
  }
  if (const toml::value* adaptive = r.Find("adaptive")) {
    if (u.adaptive) {
      ReadAdaptive(*adaptive, r.TableOf("adaptive"), *u.adaptive, r.errors());
    } else {
      r.errors().Add(*adaptive, "\"adaptive\" needs concurrency = \"adaptive\"");
    }
  }
  if (auto s = r.Integer("max_connections_status")) {
    u.max_connections_status = static_cast<unsigned>(*s);
  }
  if (auto d = r.DurationMs("max_connections_delay")) u.max_connections_delay_ms = *d;
  if (u.max_connections == 0 && !u.adaptive) {
    for (const char* key : {"max_connections_status", "max_connections_delay"}) {
      if (const toml::value* v = r.Find(key)) {
        r.errors().Add(*v, fmt::format("\"{}\" needs concurrency (or max_connections)", key));
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
  if (auto v = r.OneOf("priority")) route.priority = PriorityNamed(*v);
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

}  // namespace tollgate::rules
