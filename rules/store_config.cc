#include "rules/store_config.h"

#include <fmt/format.h>

#include <algorithm>

namespace tollgate::rules {
namespace {

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
  if (auto ms = r.DurationMs("timeout")) redis.timeout_ms = *ms;
  if (auto n = r.Integer("pool")) redis.pool = static_cast<std::size_t>(*n);
  if (auto n = r.Integer("max_pending")) {
    redis.max_pending = static_cast<std::size_t>(*n);
  }
  if (auto n = r.Integer("batch")) {
    redis.batch = static_cast<std::size_t>(*n);
  }
  if (auto policy = r.OneOf("on_error")) {
    out.on_error = *policy == "allow"   ? StoreFailurePolicy::kAllow
                   : *policy == "deny"  ? StoreFailurePolicy::kDeny
                   : *policy == "share" ? StoreFailurePolicy::kShare
                                        : StoreFailurePolicy::kLocal;
  }
  if (auto time = r.OneOf("time")) {
    redis.time = *time == "server" ? store::RedisTime::kServer : store::RedisTime::kClient;
  }
  if (auto ms = r.DurationMs("inflight_ttl")) redis.inflight_ttl_ms = *ms;
  r.Finish();
}

}  // namespace

void ReadStore(TableReader r, StoreConfig& out) {
  if (auto kind = r.OneOf("kind")) {
    out.kind = *kind == "redis" ? StoreKind::kRedis : StoreKind::kLocal;
  }
  if (auto n = r.Integer("max_keys")) {
    out.max_keys = static_cast<std::size_t>(*n);
  }
  if (const toml::value* redis = r.Find("redis")) {
    if (!redis->is_table()) {
      r.errors().Add(*redis,
                     fmt::format("\"redis\" must be a table; got {}", DescribeType(*redis)));
    } else {
      ReadRedis(TableReader(*redis, r.TableOf("redis"), r.errors()), out);
    }
  }
  r.Finish();
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
