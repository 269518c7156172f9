#include "rules/rules_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "algorithms/lease.h"
#include "algorithms/validate.h"
#include "rules/budget_config.h"
#include "rules/key_config.h"
#include "rules/match_config.h"
#include "rules/rule_set.h"
#include "rules/wait_config.h"
#include "store/calendar.h"

namespace tollgate::rules {

namespace {

std::optional<std::pair<std::int64_t, WindowLabel>> ReadWindow(const toml::value& table,
                                                               const TableSpec& spec,
                                                               ErrorList& errors) {
  TableReader r(table, spec, errors);
  const toml::value* limit = r.Require("limit");
  const toml::value* window = r.Require("window");
  std::optional<std::int64_t> l = r.Integer("limit");
  std::optional<std::int64_t> w = r.DurationMs("window");
  r.Finish();
  if (limit == nullptr || window == nullptr || !l || !w) return std::nullopt;
  return std::pair{*l, WindowLabel{window->as_string().str, std::max<std::int64_t>(1, *w / 1000)}};
}

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

namespace {

// The rule's name: required, not empty, printable ASCII, unique.
void ReadRuleName(TableReader& r, const std::vector<RuleConfig>& out, RuleConfig& rule) {
  ErrorList& errors = r.errors();
  const toml::value* name = r.Require("name");
  if (name == nullptr) return;
  auto s = ReadString(*name, "name", errors);
  if (!s) return;
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

// An exempt rule only matches: limits, keys and actions do not apply.
void RefuseInExemptRule(TableReader& r) {
  for (const char* key : {"key",
                          "algorithm",
                          "limit",
                          "window",
                          "limits",
                          "calendar",
                          "timezone",
                          "burst",
                          "sub_windows",
                          "nodelay",
                          "cost",
                          "cost_default",
                          "settle",
                          "tokens",
                          "reserve",
                          "max_output_tokens",
                          "action",
                          "max_delay",
                          "status",
                          "headers",
                          "max_inflight",
                          "max_keys",
                          "per",
                          "fair_key",
                          "max_waiting_per_flow",
                          "priority"}) {
    if (const toml::value* v = r.Find(key)) {
      r.errors().Add(*v, fmt::format("\"{}\" has no meaning in an exempt rule", key));
    }
  }
}

// A concurrency rule counts requests in flight: no algorithm or window.
void ReadConcurrencyRule(TableReader& r, std::int64_t max_inflight, RuleConfig& rule) {
  ErrorList& errors = r.errors();
  rule.max_inflight = max_inflight;
  if (rule.per == LimitUnit::kMessage) {
    errors.Add(*r.Find("per"),
               "per = \"message\" has no meaning with max_inflight: a concurrency rule counts "
               "requests in flight (an open WebSocket tunnel is one)");
  }
  for (const char* key : {"algorithm", "limit", "window", "limits", "calendar", "timezone", "burst",
                          "sub_windows", "nodelay", "cost", "cost_default", "settle", "tokens",
                          "reserve", "max_output_tokens", "action", "headers", "max_keys"}) {
    if (const toml::value* v = r.Find(key)) {
      errors.Add(*v, fmt::format("\"{}\" has no meaning with max_inflight (a concurrency "
                                 "rule); put a rate limit in a rule of its own",
                                 key));
    }
  }
  if (auto s = r.Integer("status")) rule.status = static_cast<unsigned>(*s);
  // With max_delay a request beyond the limit waits for a place.
  if (auto d = r.DurationMs("max_delay")) rule.max_delay_ms = *d;
  if (auto w = r.Integer("max_waiting")) {
    rule.max_waiting = *w;
    if (!r.Has("max_delay")) {
      errors.Add(*r.Find("max_waiting"), "\"max_waiting\" needs \"max_delay\"");
    }
  }
}

// A rate rule's windows: `limit` + `window`, `limit` + `calendar` (+
// `timezone`), or `limits = [ { limit, window }, ... ]`. `where` is the
// value their errors are reported at.
struct Windows {
  std::vector<std::pair<std::int64_t, WindowLabel>> list;
  const toml::value* where = nullptr;
  // calendar = "...": the one window's periods, and where it was written.
  std::shared_ptr<const store::Calendar> calendar;
  const toml::value* calendar_at = nullptr;
};

// RateLimit-Policy's w of a calendar period: its usual length (30 days a
// month, 365 a year); the reset the fields show is the real one.
constexpr std::int64_t kCalendarSeconds[] = {86'400, 7 * 86'400, 30 * 86'400, 365 * 86'400};

// `calendar` and `timezone` into `windows`, with the limit; false when
// the rule has no `calendar` (`timezone` alone is an error).
bool ReadCalendar(TableReader& r, const StoreConfig& store, Windows& windows) {
  ErrorList& errors = r.errors();
  const toml::value* at = r.Find("calendar");
  const std::optional<std::string> unit_name = r.OneOf("calendar");
  const std::optional<std::string> zone = r.String("timezone");
  if (at == nullptr) {
    if (const toml::value* tz = r.Find("timezone")) {
      errors.Add(*tz, "\"timezone\" applies to \"calendar\" only");
    }
    return false;
  }
  windows.calendar_at = at;
  for (const char* key : {"window", "limits"}) {
    if (const toml::value* v = r.Find(key)) {
      errors.Add(*v, fmt::format("use either \"calendar\" or \"{}\", not both: a calendar "
                                 "window is one period of the calendar",
                                 key));
    }
  }
  if (store.kind == StoreKind::kRedis && store.redis.time != store::RedisTime::kClient) {
    errors.Add(*at,
               "calendar periods are reckoned on the gateways' clocks: with [store] kind = "
               "\"redis\" they need [store.redis] time = \"client\"");
  }
  windows.where = r.Require("limit");
  const std::optional<std::int64_t> limit = r.Integer("limit");
  if (!unit_name) return true;
  const store::CalendarUnit unit = *store::ParseCalendarUnit(*unit_name);
  std::string error;
  windows.calendar = store::Calendar::Make(unit, zone.value_or("UTC"), error);
  if (!windows.calendar) {
    const toml::value* tz = r.Find("timezone");
    errors.Add(tz != nullptr ? *tz : *at,
               fmt::format("unknown time zone \"{}\": the system's time zone database "
                           "(/usr/share/zoneinfo) has no such zone ({})",
                           zone.value_or("UTC"), error));
  }
  if (limit && windows.calendar) {
    windows.list.push_back(
        {*limit, WindowLabel{*unit_name, kCalendarSeconds[static_cast<int>(unit)]}});
  }
  return true;
}

Windows ReadWindows(TableReader& r, const StoreConfig& store) {
  ErrorList& errors = r.errors();
  Windows windows;
  if (ReadCalendar(r, store, windows)) return windows;
  const toml::value* limits_value = r.Find("limits");
  windows.where = limits_value;
  if (limits_value != nullptr) {
    if (r.Has("limit") || r.Has("window")) {
      errors.Add(*limits_value, "use either \"limits\" or \"limit\" and \"window\", not both");
    }
    if (!limits_value->is_array()) {
      errors.Add(*limits_value, fmt::format("\"limits\" must be an array of {{ limit, window }} "
                                            "tables; got {}",
                                            DescribeType(*limits_value)));
      return windows;
    }
    for (const toml::value& item : limits_value->as_array()) {
      if (!item.is_table()) {
        errors.Add(item, "each \"limits\" entry must be a table { limit = N, window = \"1m\" }");
        continue;
      }
      if (auto w = ReadWindow(item, r.TableOf("limits"), errors)) windows.list.push_back(*w);
    }
    return windows;
  }
  windows.where = r.Require("limit");
  const toml::value* window = r.Require("window");
  auto l = r.Integer("limit");
  auto w = r.DurationMs("window");
  if (windows.where != nullptr && window != nullptr && l && w) {
    windows.list.push_back(
        {*l, WindowLabel{window->as_string().str, std::max<std::int64_t>(1, *w / 1000)}});
  }
  return windows;
}

// The keys that tune one algorithm, each refused with another.
struct AlgorithmOptions {
  std::optional<std::int64_t> burst;
  std::int64_t sub_windows = 10;
  bool nodelay = false;
};

AlgorithmOptions ReadAlgorithmOptions(TableReader& r,
                                      std::optional<algorithms::Algorithm> algorithm) {
  ErrorList& errors = r.errors();
  AlgorithmOptions options;
  const bool bucket = algorithm == algorithms::Algorithm::kTokenBucket ||
                      algorithm == algorithms::Algorithm::kLeakyBucket;
  options.burst = r.Integer("burst");
  if (options.burst && algorithm && !bucket) {
    errors.Add(*r.Find("burst"), "\"burst\" applies to token_bucket and leaky_bucket only");
  }
  if (auto n = r.Integer("sub_windows")) {
    options.sub_windows = *n;
    if (algorithm && algorithm != algorithms::Algorithm::kSubWindow) {
      errors.Add(*r.Find("sub_windows"), "\"sub_windows\" applies to sub_window only");
    }
  }
  if (auto b = r.Bool("nodelay")) {
    options.nodelay = *b;
    if (algorithm && algorithm != algorithms::Algorithm::kLeakyBucket) {
      errors.Add(*r.Find("nodelay"), "\"nodelay\" applies to leaky_bucket only");
    }
  }
  return options;
}

// How the rule's keys are shared by the gateways of one Redis
// (docs/leases.md): a store call per decision, or leases.
struct Sync {
  const toml::value* value = nullptr;  // `sync`, if present
  bool lease = false;
  std::optional<std::int64_t> lease_ttl_ms;
  std::optional<std::int64_t> lease_max;
};

Sync ReadSync(TableReader& r, const StoreConfig& store) {
  ErrorList& errors = r.errors();
  Sync sync;
  sync.value = r.Find("sync");
  if (auto mode = r.OneOf("sync")) {
    sync.lease = *mode == "lease";
    if (sync.lease && store.kind != StoreKind::kRedis) {
      errors.Add(*sync.value,
                 "sync = \"lease\" shares a key's budget between gateways through Redis: it "
                 "needs [store] kind = \"redis\"");
    }
  }
  sync.lease_ttl_ms = r.DurationMs("lease_ttl");
  sync.lease_max = r.Integer("lease_max");
  if (!sync.lease) {
    for (const char* key : {"lease_ttl", "lease_max"}) {
      if (const toml::value* v = r.Find(key)) {
        errors.Add(*v, fmt::format("\"{}\" applies to sync = \"lease\" only", key));
      }
    }
  }
  return sync;
}

// What a rate rule does beyond its limit: action (with max_delay and
// max_waiting), status and headers.
void ReadAction(TableReader& r, RuleConfig& rule) {
  ErrorList& errors = r.errors();
  if (auto a = r.OneOf("action")) {
    rule.action = *a == "delay"     ? RuleAction::kDelay
                  : *a == "dry_run" ? RuleAction::kDryRun
                                    : RuleAction::kReject;
  }
  if (auto d = r.DurationMs("max_delay")) rule.max_delay_ms = *d;
  if (auto n = r.Integer("max_waiting")) rule.max_waiting = *n;
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
  if (auto s = r.Integer("status")) rule.status = static_cast<unsigned>(*s);
  if (auto h = r.OneOf("headers")) {
    rule.headers = *h == "none"      ? RateLimitHeaders::kNone
                   : *h == "limited" ? RateLimitHeaders::kLimited
                                     : RateLimitHeaders::kAll;
  }
}

// The rule's own part of [store] max_keys (read before the rules); the
// rules without one share what is left (ShareStoreKeys). The rules read so
// far (`out`) and this one must fit.
void ReadMaxKeys(TableReader& r, const StoreConfig& store, const std::vector<RuleConfig>& out,
                 RuleConfig& rule) {
  if (auto n = r.Integer("max_keys")) rule.max_keys = static_cast<std::size_t>(*n);
  const std::uint64_t before = KeysNeeded(out);
  const std::uint64_t needed = before + std::max<std::size_t>(1, rule.max_keys);
  if (needed > store.max_keys && before <= store.max_keys) {
    const toml::value* at = r.Has("max_keys") ? r.Find("max_keys") : r.Find("name");
    r.errors().Add(at != nullptr ? *at : r.table(),
                   fmt::format("the rules need {} keys of the local store, more than [store] "
                               "max_keys ({}): their own max_keys, and one key at least for each "
                               "rule without one",
                               needed, store.max_keys));
  }
}

// The rule's limit, once its algorithm and windows are read without error.
void MakeLimit(TableReader& r, algorithms::Algorithm algorithm, const Windows& windows,
               const AlgorithmOptions& options, const Sync& sync, RuleConfig& rule) {
  ErrorList& errors = r.errors();
  if (windows.calendar && algorithm != algorithms::Algorithm::kFixedWindow) {
    errors.Add(*windows.calendar_at,
               fmt::format("\"calendar\" applies to fixed_window only, not {}: its windows are "
                           "the calendar's periods",
                           algorithms::AlgorithmName(algorithm)));
    return;
  }
  std::vector<algorithms::LimitParams> params;
  for (const auto& [limit, label] : windows.list) {
    algorithms::LimitParams p;
    p.algorithm = algorithm;
    p.limit = limit;
    p.window_ms = windows.calendar ? store::Calendar::SpanMs(windows.calendar->unit())
                                   : *ParseDurationMs(label.text);
    p.burst = options.burst.value_or(algorithm == algorithms::Algorithm::kTokenBucket ? limit : 0);
    p.sub_windows = options.sub_windows;
    p.shaping = options.nodelay ? algorithms::Shaping::kNoDelay : algorithms::Shaping::kDelay;
    params.push_back(p);
    rule.windows.push_back(label);
  }
  if (auto problem = algorithms::ValidateWindows(params)) {
    errors.Add(*windows.where, *problem);
  } else if (params.front().limit == 0 && (sync.lease || rule.action == RuleAction::kDelay)) {
    errors.Add(*windows.where,
               "limit = 0 refuses every request: it takes neither sync = \"lease\" "
               "nor action = \"delay\"");
  } else if (auto cost_problem = algorithms::ValidateCost(params, rule.cost)) {
    errors.Add(r.Find("cost") != nullptr ? *r.Find("cost") : *windows.where, *cost_problem);
  } else {
    store::LimitSpec spec = store::LimitSpec::Make(params, windows.calendar);
    if (sync.lease && sync.value != nullptr) {
      ReadLease(params, sync.lease_ttl_ms, sync.lease_max, r, spec);
    }
    if (sync.lease && spec.lease) spec.lease->rule = rule.name;
    rule.limit = std::make_shared<const store::LimitSpec>(std::move(spec));
  }
}

}  // namespace

void ReadRule(TableReader r, const StoreConfig& store, std::size_t prices,
              std::vector<RuleConfig>& out) {
  RuleConfig rule;
  ErrorList& errors = r.errors();
  ReadRuleName(r, out, rule);
  if (const toml::value* m = r.Find("match")) {
    ReadMatch(*m, r.TableOf("match"), MatchTable::kMatch, rule.match, errors);
  }
  if (auto b = r.Bool("exempt")) rule.exempt = *b;
  if (rule.exempt) {
    RefuseInExemptRule(r);
    r.Finish();
    out.push_back(std::move(rule));
    return;
  }
  if (const toml::value* key = r.Require("key")) {
    if (auto parts = ReadKey(*key, "key", errors)) rule.key = *parts;
    CheckDescriptorKey(rule, r.Find("match"), *key, r, errors);
  }
  if (auto per = r.OneOf("per")) {
    rule.per = *per == "message" ? LimitUnit::kMessage : LimitUnit::kRequest;
  }
  rule.body_key = std::any_of(rule.key.begin(), rule.key.end(),
                              [](const KeyPart& p) { return p.kind == KeyPartKind::kJson; });
  if (rule.body_key &&
      (rule.per == LimitUnit::kMessage || r.Has("max_inflight") || rule.match.ForDescriptors())) {
    errors.Add(*r.Find("key"),
               "a \"json:PATH\" key part needs the request body: it applies to rate rules of HTTP "
               "requests only (not per = \"message\", max_inflight or descriptor rules)");
  }
  if (auto n = r.Integer("max_inflight")) {
    ReadConcurrencyRule(r, *n, rule);
    ReadRuleWaits(r, rule);
    r.Finish();
    out.push_back(std::move(rule));
    return;
  }
  r.Require("algorithm");
  std::optional<algorithms::Algorithm> algorithm;
  if (auto name = r.OneOf("algorithm")) algorithm = algorithms::ParseAlgorithm(*name);
  const Windows windows = ReadWindows(r, store);
  const AlgorithmOptions options = ReadAlgorithmOptions(r, algorithm);
  ReadRuleBudget(r, algorithm, prices, rule);
  const Sync sync = ReadSync(r, store);
  ReadAction(r, rule);
  ReadRuleWaits(r, rule);
  ReadMaxKeys(r, store, out, rule);
  if (algorithm && windows.where != nullptr && !windows.list.empty()) {
    MakeLimit(r, *algorithm, windows, options, sync, rule);
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

}  // namespace tollgate::rules
