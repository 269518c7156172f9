#include "gateway/admin/status.h"

#include <algorithm>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/url/encode.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "gateway/telemetry/utf8.h"
#include "rules/rule_set.h"

namespace tollgate::gateway {
namespace {

// The admin API's query naming `rule`'s `key` ("rule=per-ip&ip=192.0.2.1"),
// for the status page's link to the key's state; nullopt when what the
// page shows of a part does not name it (a header's value, which may be a
// credential, is shown as a fingerprint only).
std::optional<std::string> KeyQueryOf(const rules::RuleConfig& rule, std::string_view key) {
  const auto encode = [](std::string_view text) {
    return boost::urls::encode(text, boost::urls::unreserved_chars);
  };
  std::string query = "rule=" + encode(rule.name);
  for (const rules::ShownPart& part : rules::ShownKeyParts(rule, key)) {
    if (!part.names_key) return std::nullopt;
    query += "&" + encode(part.name) + "=" + encode(part.value);
  }
  return query;
}

namespace json = boost::json;

std::int64_t Index(const std::vector<std::string>& names, std::string_view name) {
  const auto it = std::find(names.begin(), names.end(), name);
  return it == names.end() ? -1 : it - names.begin();
}

// Per-second increases of `value(sample, id)` over the samples.
template <typename Samples, typename F>
json::array Series(const Samples& samples, std::int64_t id, F value) {
  json::array out;
  for (std::size_t i = 1; i < samples.size(); ++i) {
    const std::uint64_t now = value(samples[i].counts, id);
    const std::uint64_t before = value(samples[i - 1].counts, id);
    out.push_back(now >= before ? now - before : 0);
  }
  return out;
}

std::uint64_t Total(const json::array& series, std::size_t last = SIZE_MAX) {
  std::uint64_t n = 0;
  const std::size_t from = series.size() > last ? series.size() - last : 0;
  for (std::size_t i = from; i < series.size(); ++i) n += series[i].to_number<std::uint64_t>();
  return n;
}

std::string_view UpstreamState(std::uint64_t responses, std::uint64_t failures,
                               std::uint64_t recent_responses, std::uint64_t recent_failures) {
  if (responses == 0 && failures == 0) return "idle";
  if (recent_failures > 0 && recent_responses == 0) return "down";
  if (failures > 0) return "degraded";
  return "up";
}

}  // namespace

void StatusBoard::Sample(std::int64_t unix_ms) {
  Taken taken;
  taken.unix_ms = unix_ms;
  taken.counts = metrics_.Snapshot();
  ThreadMetrics::KeyTally tally = metrics_.TakeLimitedKeys();
  taken.untracked = tally.untracked;
  taken.keys.assign(std::make_move_iterator(tally.counts.begin()),
                    std::make_move_iterator(tally.counts.end()));
  if (taken.keys.size() > kKeysPerSecond) {
    std::nth_element(taken.keys.begin(), taken.keys.begin() + kKeysPerSecond, taken.keys.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    for (std::size_t i = kKeysPerSecond; i < taken.keys.size(); ++i) {
      taken.untracked += taken.keys[i].second;
    }
    taken.keys.resize(kKeysPerSecond);
  }
  samples_.push_back(std::move(taken));
  while (samples_.size() > kSeconds + 1) samples_.pop_front();
}

std::string StatusBoard::RenderJson(const Context& context) const {
  const rules::Config& config = *context.config;
  json::object doc;
  doc["version"] = context.version;
  doc["now_ms"] = context.unix_ms;
  doc["ready"] = context.ready;
  doc["interval_ms"] = 1000;
  doc["samples"] = samples_.empty() ? 0 : samples_.size() - 1;
  doc["store"] = json::parse(context.store_json);

  const Metrics::ReloadStatus reloads = metrics_.Reloads();
  json::object cfg;
  cfg["path"] = config.path;
  cfg["digest"] = config.digest;
  cfg["generation"] = context.generation;
  cfg["in_force_since_ms"] = static_cast<std::int64_t>(reloads.last_success * 1000);
  cfg["reloads_ok"] = reloads.ok;
  cfg["reloads_failed"] = reloads.failed;
  json::object last;
  if (reloads.last_attempt == 0) {
    last["result"] = "none";
  } else {
    last["result"] = reloads.last_ok ? "ok" : "failed";
    last["at_ms"] = static_cast<std::int64_t>(reloads.last_attempt * 1000);
    if (!reloads.last_ok) last["error"] = reloads.last_error;
  }
  cfg["last_reload"] = std::move(last);
  doc["config"] = std::move(cfg);

  json::array certificates;
  for (const Context::Certificate& c : context.certificates) {
    json::object o;
    o["listener"] = c.listener;
    o["file"] = c.file;
    o["subject"] = c.subject;
    o["not_after_ms"] = c.not_after_unix * 1000;
    o["expires_in_days"] = (c.not_after_unix * 1000 - context.unix_ms) / 86'400'000;
    certificates.push_back(std::move(o));
  }
  doc["certificates"] = std::move(certificates);

  const Metrics::Counts* latest = samples_.empty() ? nullptr : &samples_.back().counts;
  const auto decisions = [](DecisionKind a, DecisionKind b) {
    return [a, b](const Metrics::Counts& c, std::int64_t id) -> std::uint64_t {
      if (id < 0 || static_cast<std::size_t>(id) >= c.decisions.size()) return 0;
      const auto& d = c.decisions[static_cast<std::size_t>(id)];
      return d[static_cast<int>(a)] + (a == b ? 0 : d[static_cast<int>(b)]);
    };
  };
  json::array rules;
  for (const rules::RuleConfig& rule : config.rules) {
    const std::int64_t id = latest ? Index(latest->rules, rule.name) : -1;
    json::object r;
    r["name"] = rule.name;
    r["key"] = rule.KeyKind();
    r["exempt"] = rule.exempt;
    // An exempt rule's matches show as allowed.
    const DecisionKind passed = rule.exempt ? DecisionKind::kExempt : DecisionKind::kAllowed;
    r["allowed"] = Series(samples_, id, decisions(passed, passed));
    r["limited"] = Series(samples_, id, decisions(DecisionKind::kLimited, DecisionKind::kDelayed));
    r["allowed_last_minute"] = Total(r["allowed"].as_array());
    r["limited_last_minute"] = Total(r["limited"].as_array());
    if (rule.limit && rule.limit->lease) {
      // How much of the rule Redis no longer decides one by one.
      json::object lease;
      const auto counts =
          std::find_if(context.leases.begin(), context.leases.end(),
                       [&](const store::LeaseStats::Counts& c) { return c.rule == rule.name; });
      lease["decisions"] = counts == context.leases.end() ? 0 : counts->decisions;
      lease["from_lease"] = counts == context.leases.end() ? 0 : counts->from_lease;
      r["lease"] = std::move(lease);
    }
    rules.push_back(std::move(r));
  }
  doc["rules"] = std::move(rules);

  // The last minute's limited keys, summed over the samples.
  std::unordered_map<std::string_view, std::uint64_t> keys;
  std::uint64_t untracked = 0;
  for (std::size_t i = 1; i < samples_.size(); ++i) {
    for (const auto& [key, n] : samples_[i].keys) keys[key] += n;
    untracked += samples_[i].untracked;
  }
  std::vector<std::pair<std::string_view, std::uint64_t>> top(keys.begin(), keys.end());
  const std::size_t shown = std::min(top.size(), kTopKeys);
  std::partial_sort(top.begin(), top.begin() + static_cast<std::ptrdiff_t>(shown), top.end(),
                    [](const auto& a, const auto& b) {
                      return a.second != b.second ? a.second > b.second : a.first < b.first;
                    });
  json::array top_keys;
  for (std::size_t i = 0; i < shown; ++i) {
    const std::string_view key = top[i].first;
    const std::string_view rule_name = key.substr(0, key.find('\x1f'));
    const auto rule = std::find_if(config.rules.begin(), config.rules.end(),
                                   [&](const rules::RuleConfig& r) { return r.name == rule_name; });
    json::object k;
    k["rule"] = ValidUtf8(rule_name);
    k["key"] =
        rule == config.rules.end() ? std::string() : ValidUtf8(rules::DisplayKey(*rule, key));
    k["limited"] = top[i].second;
    if (rule != config.rules.end()) {
      if (std::optional<std::string> query = KeyQueryOf(*rule, key)) k["query"] = *query;
    }
    top_keys.push_back(std::move(k));
  }
  doc["top_limited"] = std::move(top_keys);
  doc["untracked_limited"] = untracked;

  const std::size_t recent = static_cast<std::size_t>(kHealthWindowMs / 1000);
  json::array upstreams;
  for (const rules::UpstreamConfig& upstream : config.upstreams) {
    const std::int64_t id = latest ? Index(latest->upstreams, upstream.name) : -1;
    const auto pick = [](bool failures) {
      return [failures](const Metrics::Counts& c, std::int64_t id) -> std::uint64_t {
        const auto& v = failures ? c.upstream_failures : c.upstream_responses;
        return id < 0 || static_cast<std::size_t>(id) >= v.size() ? 0
                                                                  : v[static_cast<std::size_t>(id)];
      };
    };
    json::object u;
    u["name"] = upstream.name;
    json::array servers;
    for (const rules::HostPort& s : upstream.servers) servers.push_back(json::value(s.ToString()));
    u["servers"] = std::move(servers);
    json::array responses = Series(samples_, id, pick(false));
    json::array failures = Series(samples_, id, pick(true));
    u["state"] = UpstreamState(Total(responses), Total(failures), Total(responses, recent),
                               Total(failures, recent));
    u["responses_last_minute"] = Total(responses);
    u["failures_last_minute"] = Total(failures);
    u["responses"] = std::move(responses);
    u["failures"] = std::move(failures);
    for (const UpstreamConcurrency& c : context.concurrency) {
      if (c.upstream != upstream.name) continue;
      json::object limit{{"adaptive", c.adaptive}, {"limit", c.limit}, {"inflight", c.inflight}};
      if (c.adaptive) limit["min_latency_ms"] = static_cast<double>(c.min_latency_us) / 1000.0;
      u["concurrency"] = std::move(limit);
    }
    upstreams.push_back(std::move(u));
  }
  doc["upstreams"] = std::move(upstreams);
  return json::serialize(doc);
}

}  // namespace tollgate::gateway
