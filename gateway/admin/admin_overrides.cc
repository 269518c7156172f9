#include "gateway/admin/admin_overrides.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <cctype>

#include "algorithms/limit.h"
#include "algorithms/validate.h"
#include "gateway/admin/admin_keys.h"
#include "gateway/core/gateway_state.h"
#include "rules/duration.h"

namespace tollgate::gateway {
namespace {

namespace json = boost::json;

using Override = AdminOverrides::Override;
using Problem = AdminOverrides::Problem;

// A key part's name as ids and lists show it: header names in lower case.
std::string PartName(std::string_view name) {
  std::string out(name);
  if (out.starts_with("header:")) {
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

// How an override is read: from an API call (a ttl) or as stored in Redis
// (its end).
enum class Source : std::uint8_t { kApi, kStored };

std::optional<Override> FromJson(const json::value& value, Source source,
                                 std::int64_t now_unix_ms, const std::string& at,
                                 Problem& problem) {
  auto bad = [&](std::string_view field, std::string message) -> std::optional<Override> {
    problem = {400, at + std::string(field), std::move(message)};
    return std::nullopt;
  };
  if (!value.is_object()) return bad(at.empty() ? "body" : "", "must be a JSON object");
  Override o;
  bool ended = false;
  bool has_key = false;
  for (const auto& [name, v] : value.as_object()) {
    if (name == "rule") {
      if (!v.is_string() || v.as_string().empty()) return bad("rule", "must be a rule's name");
      o.rule = v.as_string();
    } else if (name == "key") {
      if (!v.is_object()) {
        return bad("key", "must be an object of the key's parts, e.g. {\"user\": \"alice\"}");
      }
      has_key = true;
      for (const auto& [part, text] : v.as_object()) {
        if (!text.is_string()) return bad("key." + std::string(part), "must be a string");
        o.key.emplace_back(PartName(part), text.as_string());
      }
    } else if (name == "limits") {
      if (!v.is_array() || v.as_array().empty() ||
          v.as_array().size() > algorithms::kMaxWindows) {
        return bad("limits", "must be an array of 1 to " +
                                 std::to_string(algorithms::kMaxWindows) +
                                 " objects such as {\"limit\": 1000, \"window\": \"1m\"}");
      }
      const json::array& limits = v.as_array();
      for (std::size_t i = 0; i < limits.size(); ++i) {
        const std::string field = "limits[" + std::to_string(i) + "]";
        if (!limits[i].is_object()) return bad(field, "must be {\"limit\": N, \"window\": \"1m\"}");
        AdminOverrides::Limit limit;
        bool has_limit = false, has_window = false;
        for (const auto& [lname, lv] : limits[i].as_object()) {
          if (lname == "limit") {
            if (!lv.is_int64() || lv.as_int64() < 1) {
              return bad(field + ".limit", "must be an integer of at least 1");
            }
            limit.limit = lv.as_int64();
            has_limit = true;
          } else if (lname == "window") {
            std::string problem = rules::DescribeDurationProblem(rules::DurationProblem::kSyntax);
            const std::optional<std::int64_t> ms =
                lv.is_string() ? rules::ReadPositiveDurationMs(lv.as_string(), problem)
                               : std::nullopt;
            if (!ms) return bad(field + ".window", std::move(problem));
            limit.window = lv.as_string();
            has_window = true;
          } else if (lname == "burst") {
            if (!lv.is_int64() || lv.as_int64() < 0) {
              return bad(field + ".burst", "must be an integer of at least 0");
            }
            limit.burst = lv.as_int64();
          } else {
            return bad(field + "." + std::string(lname),
                       "unknown field; a limit has limit, window and burst");
          }
        }
        if (!has_limit) return bad(field + ".limit", "missing");
        if (!has_window) return bad(field + ".window", "missing");
        o.limits.push_back(std::move(limit));
      }
    } else if (name == "ttl" && source == Source::kApi) {
      std::string problem = rules::DescribeDurationProblem(rules::DurationProblem::kSyntax);
      const std::optional<std::int64_t> ttl =
          v.is_string() ? rules::ReadPositiveDurationMs(v.as_string(), problem) : std::nullopt;
      if (!ttl) return bad("ttl", std::move(problem));
      o.expires_unix_ms = now_unix_ms + *ttl;
      ended = true;
    } else if (name == "expires_unix_ms" && source == Source::kStored && v.is_int64()) {
      o.expires_unix_ms = v.as_int64();
      ended = true;
    } else if (source == Source::kApi) {
      return bad(name, "unknown field; an override has rule, key, limits and ttl");
    }
  }
  if (o.rule.empty()) return bad("rule", "missing: the rule whose key gets other limits");
  if (!has_key) return bad("key", "missing: the key's parts, e.g. {\"user\": \"alice\"}");
  if (o.limits.empty()) return bad("limits", "missing: e.g. [{\"limit\": 1000, \"window\": \"1m\"}]");
  if (!ended) return bad("ttl", "missing: how long the override lasts, e.g. \"1h\"");
  std::sort(o.key.begin(), o.key.end());
  return o;
}

// The rules the overrides of one compilation give, shared by those of one
// rule with the same limits.
using RuleForms = std::map<std::string, std::shared_ptr<const rules::RuleConfig>>;

// `o` against `config`: its rule's key and the rule with its limits, or
// nullopt with `problem` (fields start with `at`).
std::optional<OverrideSet::Entry> Compile(const rules::Config& config, const Override& o,
                                          const std::string& at, RuleForms& forms,
                                          Problem& problem) {
  const KeyQuery q = ParseKeyParts(config, o.rule, o.key, at + "key.");
  if (q.error != KeyQueryError::kNone) {
    const bool rule_field = q.field == "rule";
    problem = {q.error == KeyQueryError::kUnknownRule ? 404u : 400u,
               rule_field ? at + "rule" : q.field, q.message};
    return std::nullopt;
  }
  const rules::RuleConfig& rule = *q.rule;
  const algorithms::LimitParams& first = rule.limit->windows.front();
  const bool bucket = first.algorithm == algorithms::Algorithm::kTokenBucket ||
                      first.algorithm == algorithms::Algorithm::kLeakyBucket;
  std::vector<algorithms::LimitParams> params;
  std::vector<rules::WindowLabel> labels;
  std::string form = std::to_string(q.rule_index);
  for (std::size_t i = 0; i < o.limits.size(); ++i) {
    const AdminOverrides::Limit& l = o.limits[i];
    if (l.burst && !bucket) {
      problem = {400, at + "limits[" + std::to_string(i) + "].burst",
                 "rule \"" + rule.name + "\" uses " +
                     std::string(algorithms::AlgorithmName(first.algorithm)) +
                     ": burst applies to token_bucket and leaky_bucket only"};
      return std::nullopt;
    }
    algorithms::LimitParams p = first;
    p.limit = l.limit;
    p.window_ms = rules::ParseDurationMs(l.window).value_or(1);
    p.burst = l.burst.value_or(first.algorithm == algorithms::Algorithm::kTokenBucket ? l.limit
                                                                                     : first.burst);
    params.push_back(p);
    labels.push_back({l.window, std::max<std::int64_t>(1, p.window_ms / 1000)});
    form += '\x1f' + l.window;
  }
  std::optional<std::string> wrong = algorithms::ValidateWindows(params);
  if (!wrong) wrong = algorithms::ValidateCost(params, rule.cost);
  if (wrong) {
    problem = {400, at + "limits", *wrong};
    return std::nullopt;
  }
  store::LimitSpec spec = store::LimitSpec::Make(std::move(params));
  form += '\x1f' + std::to_string(spec.fingerprint);
  std::shared_ptr<const rules::RuleConfig>& shared = forms[form];
  if (shared == nullptr) {
    auto copy = std::make_shared<rules::RuleConfig>(rule);
    copy->limit = std::make_shared<const store::LimitSpec>(std::move(spec));
    copy->windows = std::move(labels);
    shared = std::move(copy);
  }
  OverrideSet::Entry entry;
  entry.rule_index = q.rule_index;
  entry.key = q.key;
  entry.applied.rule = shared;
  entry.applied.store_key = kOverrideKeyMark + q.key;
  entry.applied.expires_unix_ms = o.expires_unix_ms;
  return entry;
}

json::object KeyObject(const Override& o) {
  json::object key;
  for (const auto& [name, value] : o.key) key[name] = value;
  return key;
}

// The JSON an override is stored with in the shared hash (and the start
// of what the API shows of it).
json::object StoredDoc(const Override& o) {
  json::array limits;
  for (const AdminOverrides::Limit& l : o.limits) {
    json::object limit{{"limit", l.limit}, {"window", l.window}};
    if (l.burst) limit["burst"] = *l.burst;
    limits.emplace_back(std::move(limit));
  }
  return {{"rule", o.rule},
          {"key", KeyObject(o)},
          {"limits", std::move(limits)},
          {"expires_unix_ms", o.expires_unix_ms}};
}

}  // namespace

std::string Override::Id() const { return AdminOverrides::IdOf(rule, key); }

std::string AdminOverrides::IdOf(std::string_view rule,
                                 std::vector<std::pair<std::string, std::string>> params) {
  for (auto& [name, value] : params) name = PartName(name);
  std::sort(params.begin(), params.end());
  json::array id{json::string(rule)};
  for (const auto& [name, value] : params) {
    id.emplace_back(name);
    id.emplace_back(value);
  }
  return json::serialize(id);
}

AdminOverrides::AdminOverrides(OverrideTable& table, const StateSource& states,
                               const store::Clock& clock, store::RedisStore* redis)
    : table_(table), states_(states), clock_(clock) {
  if (redis != nullptr) shared_.emplace(*redis, "overrides");
}

std::optional<std::vector<Override>> AdminOverrides::Parse(std::string_view body,
                                                           const rules::Config& config,
                                                           std::int64_t now_unix_ms,
                                                           Problem& problem) {
  boost::system::error_code ec;
  const json::value doc = json::parse(body, ec);
  if (ec || !(doc.is_object() || (doc.is_array() && !doc.as_array().empty()))) {
    problem = {400, "body", "must be a JSON object, or a non-empty array of them"};
    return std::nullopt;
  }
  std::vector<const json::value*> items;
  if (doc.is_object()) {
    items.push_back(&doc);
  } else {
    for (const json::value& v : doc.as_array()) items.push_back(&v);
  }
  std::vector<Override> out;
  RuleForms forms;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string at = doc.is_array() ? "[" + std::to_string(i) + "]." : std::string();
    std::optional<Override> o = FromJson(*items[i], Source::kApi, now_unix_ms, at, problem);
    if (!o) {
      if (!problem.field.empty() && problem.field.back() == '.') problem.field.pop_back();
      return std::nullopt;
    }
    if (!Compile(config, *o, at, forms, problem)) return std::nullopt;
    out.push_back(std::move(*o));
  }
  return out;
}

json::object AdminOverrides::Describe(const Override& o, std::int64_t now_unix_ms) const {
  json::object out = StoredDoc(o);
  out["ttl_ms"] = std::max<std::int64_t>(0, o.expires_unix_ms - now_unix_ms);
  out["applies"] = !dormant_.contains(o.Id());
  return out;
}

json::object AdminOverrides::DescribeApplied(const AppliedOverride& o, std::int64_t now_unix_ms) {
  const rules::RuleConfig& rule = *o.rule;
  json::array limits;
  for (std::size_t i = 0; i < rule.windows.size(); ++i) {
    const algorithms::LimitParams& p = rule.limit->windows[i];
    json::object limit{{"limit", p.limit}, {"window", rule.windows[i].text}};
    if (p.algorithm == algorithms::Algorithm::kTokenBucket ||
        p.algorithm == algorithms::Algorithm::kLeakyBucket) {
      limit["burst"] = p.burst;
    }
    limits.emplace_back(std::move(limit));
  }
  return {{"limits", std::move(limits)},
          {"expires_unix_ms", o.expires_unix_ms},
          {"ttl_ms", std::max<std::int64_t>(0, o.expires_unix_ms - now_unix_ms)}};
}

std::vector<Override> AdminOverrides::Current() const {
  const std::int64_t now = clock_.UnixMs();
  std::vector<Override> out;
  for (const auto& [id, o] : kept_) {
    if (o.expires_unix_ms > now) out.push_back(o);
  }
  return out;
}

const Override* AdminOverrides::Find(std::string_view id) const {
  const auto it = kept_.find(std::string(id));
  if (it == kept_.end() || it->second.expires_unix_ms <= clock_.UnixMs()) return nullptr;
  return &it->second;
}

std::optional<AppliedOverride> AdminOverrides::Applied(const rules::RuleConfig& rule,
                                                       std::string_view key) const {
  const std::shared_ptr<const OverrideSet> set = table_.Load();
  if (set == nullptr) return std::nullopt;
  const AppliedOverride* o = set->Find(rule, key, clock_.UnixMs());
  if (o == nullptr) return std::nullopt;
  return *o;
}

void AdminOverrides::Apply() {
  const std::shared_ptr<const GatewayState> state = states_.Load();
  generation_ = states_.generation();
  const rules::Config& config = *state->config;
  const std::int64_t now = clock_.UnixMs();
  std::erase_if(kept_, [&](const auto& item) { return item.second.expires_unix_ms <= now; });
  std::vector<OverrideSet::Entry> entries;
  RuleForms forms;
  dormant_.clear();
  for (const auto& [id, o] : kept_) {
    Problem problem;
    std::optional<OverrideSet::Entry> entry = Compile(config, o, "", forms, problem);
    if (!entry) {
      dormant_.insert(id);
      continue;
    }
    entries.push_back(std::move(*entry));
  }
  table_.Set(std::make_shared<const OverrideSet>(config.rules, std::move(entries)));
}

Task<bool> AdminOverrides::Put(std::vector<Override> overrides) {
  if (shared_) {
    std::vector<std::string> id_and_stored;
    for (const Override& o : overrides) {
      id_and_stored.push_back(o.Id());
      id_and_stored.push_back(AdminHash::Stored(o.expires_unix_ms, StoredDoc(o)));
    }
    const AdminHash::Write write = co_await shared_->Put(std::move(id_and_stored));
    if (write == AdminHash::Write::kFailed) co_return false;
    if (write == AdminHash::Write::kMoved) {
      co_await Refresh();
      co_return true;
    }
  }
  // Applied here at once; the other gateways see the version move.
  for (Override& o : overrides) {
    std::string id = o.Id();
    kept_.insert_or_assign(std::move(id), std::move(o));
  }
  Apply();
  co_return true;
}

Task<std::optional<bool>> AdminOverrides::Remove(std::string id) {
  if (!shared_) {
    const bool removed = kept_.erase(id) == 1;
    Apply();
    co_return removed;
  }
  const std::optional<bool> removed = co_await shared_->Remove(std::move(id));
  if (removed) co_await Refresh();
  co_return removed;
}

Task<bool> AdminOverrides::Refresh() {
  const std::int64_t now = clock_.UnixMs();
  const bool over = std::any_of(kept_.begin(), kept_.end(), [&](const auto& item) {
    return item.second.expires_unix_ms <= now;
  });
  std::vector<AdminHash::Entry> entries;
  const AdminHash::Read read = co_await shared_->ReadIfChanged(over ? now : 0, entries);
  if (read != AdminHash::Read::kChanged) co_return read == AdminHash::Read::kUnchanged;
  std::map<std::string, Override> kept;
  for (const AdminHash::Entry& entry : entries) {
    Problem problem;
    std::optional<Override> o =
        entry.doc.is_null() ? std::nullopt
                            : FromJson(entry.doc, Source::kStored, now, "", problem);
    if (!o) {
      spdlog::warn("admin: a stored override is not readable, left out: {}", entry.stored);
      continue;
    }
    std::string id = o->Id();
    kept.insert_or_assign(std::move(id), std::move(*o));
  }
  kept_ = std::move(kept);
  Apply();
  co_return true;
}

void AdminOverrides::Start(asio::io_context& io) {
  timer_.emplace(io.get_executor());
  asio::co_spawn(io, RefreshLoop(), asio::detached);
}

void AdminOverrides::Stop() {
  stopped_ = true;
  if (timer_) timer_->cancel();
}

Task<void> AdminOverrides::RefreshLoop() {
  while (!stopped_) {
    if (shared_) co_await Refresh();
    // A reload: the overrides are compiled against the new rules. Those
    // over are dropped from the table.
    const std::int64_t now = clock_.UnixMs();
    const bool over = std::any_of(kept_.begin(), kept_.end(), [&](const auto& item) {
      return item.second.expires_unix_ms <= now;
    });
    if (states_.generation() != generation_ || over) Apply();
    timer_->expires_after(kRefreshInterval);
    co_await timer_->async_wait(kUseTuple);
  }
}

}  // namespace tollgate::gateway
