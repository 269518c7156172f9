#include "gateway/admin/admin_api.h"

#include <spdlog/spdlog.h>

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <unordered_map>

#include "gateway/core/admission.h"
#include "gateway/admin/admin_blocks.h"
#include "gateway/admin/admin_keys.h"
#include "gateway/admin/admin_overrides.h"
#include "gateway/admin/admin_views.h"
#include "gateway/admin/store_reply.h"
#include "gateway/telemetry/utf8.h"
#include "gateway/core/gateway_state.h"
#include "store/redis_store.h"

namespace tollgate::gateway {
namespace {

namespace json = boost::json;

using Response = http::response<http::string_body>;

Response Json(http::status status, const json::value& body) {
  Response res{status, 11};
  res.set(http::field::server, "tollgate");
  res.set(http::field::content_type, "application/json");
  res.set(http::field::cache_control, "no-store");
  res.body() = json::serialize(body);
  res.body() += '\n';
  res.prepare_payload();
  return res;
}

// {"error":code,"message":message,"status":N} and `extra`'s fields.
Response Error(http::status status, std::string_view code, std::string_view message,
               json::object extra = {}) {
  extra["error"] = code;
  extra["message"] = message;
  extra["status"] = static_cast<unsigned>(status);
  return Json(status, extra);
}

// The endpoints and the methods each answers.
struct Endpoint {
  std::string_view path;
  bool get = false;
  bool del = false;
  bool put = false;
};
constexpr std::string_view kKeysPath = "/api/v1/keys";
constexpr std::string_view kBlocksPath = "/api/v1/blocks";
constexpr std::string_view kOverridesPath = "/api/v1/overrides";
constexpr Endpoint kEndpoints[] = {
    {"/api/v1/rules", true, false, false},
    {kKeysPath, true, true, false},
    {kBlocksPath, true, true, true},
    {kOverridesPath, true, true, true},
};

// 404 for a rule the configuration does not have, with the list of those
// it has.
Response UnknownRule(const rules::Config& config, const std::string& field,
                     const std::string& message) {
  json::array names;
  for (const rules::RuleConfig& rule : config.rules) names.emplace_back(rule.name);
  return Error(http::status::not_found, "unknown_rule", message,
               {{"field", field}, {"rules", std::move(names)}});
}

std::string_view QueryOf(std::string_view target) {
  const std::size_t mark = target.find('?');
  return mark == std::string_view::npos ? std::string_view() : target.substr(mark + 1);
}


Response StoreUnavailable() {
  return Error(http::status::service_unavailable, "store_unavailable",
               "the store did not answer; try again");
}

std::string AllowOf(const Endpoint& e) {
  std::string allow;
  if (e.get) allow = "GET, HEAD";
  if (e.put) allow += allow.empty() ? "PUT" : ", PUT";
  if (e.del) allow += allow.empty() ? "DELETE" : ", DELETE";
  return allow;
}

bool Answers(const Endpoint& e, http::verb method) {
  switch (method) {
    case http::verb::get:
    case http::verb::head:
      return e.get;
    case http::verb::put:
      return e.put;
    case http::verb::delete_:
      return e.del;
    default:
      return false;
  }
}

}  // namespace

AdminApi::AdminApi(const StateSource& states, ListenerScope scope, store::LocalStore& local,
                   store::RedisStore* redis, AdminBlocks& blocks, AdminOverrides& overrides,
                   const store::Clock& clock, Metrics* metrics)
    : states_(states),
      scope_(scope),
      local_(local),
      redis_(redis),
      blocks_(blocks),
      overrides_(overrides),
      clock_(clock),
      metrics_(metrics) {}

json::value AdminApi::Listed(std::string_view id, std::int64_t now_unix_ms) const {
  for (const rules::Block& b : blocks_.Current()) {
    if (b.Id() == id) return AdminBlocks::Describe(b, now_unix_ms);
  }
  return nullptr;
}

Task<Response> AdminApi::Blocks(const http::request<http::string_body>& req,
                                const Caller& caller) {
  const std::int64_t now = clock_.UnixMs();
  if (req.method() == http::verb::put) {
    std::string field, message;
    bool many = false;
    std::optional<std::vector<rules::Block>> blocks =
        AdminBlocks::Parse(req.body(), now, many, field, message);
    if (!blocks) {
      co_return Error(http::status::bad_request, "bad_request", field + ": " + message,
                      {{"field", field}});
    }
    // What each id had before (for the audit), found in one pass.
    const std::vector<rules::Block> current = blocks_.Current();
    std::unordered_map<std::string, const rules::Block*> in_force;
    for (const rules::Block& b : current) in_force[b.Id()] = &b;
    json::array shown;
    std::vector<std::pair<std::string, json::value>> before;
    for (const rules::Block& block : *blocks) {
      shown.emplace_back(AdminBlocks::Describe(block, now));
      std::string id = block.Id();
      const auto it = in_force.find(id);
      json::value was = it == in_force.end() ? json::value(nullptr)
                                             : json::value(AdminBlocks::Describe(*it->second, now));
      // A later block of the same id replaces this one.
      in_force[id] = &block;
      before.emplace_back(std::move(id), std::move(was));
    }
    const bool stored = co_await blocks_.Put(std::move(*blocks));
    if (!stored) co_return StoreUnavailable();
    // One audit line per block, as separate calls would give.
    for (std::size_t i = 0; i < shown.size(); ++i) {
      RecordChange(AdminChange::kBlock, caller, "id=" + EscapeLogText(before[i].first),
                   before[i].second, shown[i]);
    }
    if (many) co_return Json(http::status::ok, json::object{{"blocks", std::move(shown)}});
    co_return Json(http::status::ok, json::object{{"block", std::move(shown[0])}});
  }
  if (req.method() == http::verb::delete_) {
    const std::string_view target = req.target();
    const std::size_t mark = target.find('?');
    const std::optional<std::string> id =
        QueryValue(mark == std::string_view::npos ? std::string_view() : target.substr(mark + 1),
                   "id");
    if (!id) {
      co_return Error(http::status::bad_request, "bad_request",
                      "id: missing: name the block with id=<its id, as listed>", {{"field", "id"}});
    }
    const json::value before = Listed(*id, now);
    const std::optional<bool> removed = co_await blocks_.Remove(*id);
    if (!removed) co_return StoreUnavailable();
    if (!*removed) {
      co_return Error(http::status::not_found, "unknown_block", "no block with id \"" + *id + "\"",
                      {{"field", "id"}});
    }
    RecordChange(AdminChange::kUnblock, caller, "id=" + EscapeLogText(*id), before, nullptr);
    co_return Json(http::status::ok, json::object{{"removed", *id}});
  }
  json::array list;
  for (const rules::Block& b : blocks_.Current()) list.emplace_back(AdminBlocks::Describe(b, now));
  co_return Json(http::status::ok, json::object{{"blocks", std::move(list)}});
}

Task<std::optional<json::array>> AdminApi::ReadWindows(const GatewayState& state,
                                                        const rules::RuleConfig& rule,
                                                        std::string key,
                                                        std::uint32_t partition) {
  const store::LimitSpec& limit = *rule.limit;
  store::Store& store = redis_ != nullptr ? static_cast<store::Store&>(*redis_) : local_;
  const LimitContext context = MakeLimitContext(state, store, nullptr);
  // A calendar's periods are reckoned on the wall clock (store.h).
  const std::int64_t now_ms = limit.calendar ? context.unix_ms : context.store_now_ms;
  std::vector<algorithms::WindowView> views(limit.windows.size());
  if (redis_ != nullptr) {
    const Executor executor = co_await asio::this_coro::executor;
    StoreReply reply(executor);
    redis_->Inspect(key, limit, now_ms, reply);
    const store::StoreStatus status = co_await reply.Wait();
    constexpr std::size_t kPerWindow = 5;  // key_peek.lua's integers per window
    if (status != store::StoreStatus::kOk ||
        reply.values().size() != kPerWindow * views.size()) {
      co_return std::nullopt;
    }
    for (std::size_t i = 0; i < views.size(); ++i) {
      const std::int64_t* v = &reply.values()[kPerWindow * i];
      views[i] = {v[0], v[1], v[2], v[3], v[4]};
    }
  } else {
    local_.Inspect({key, &limit, 1, now_ms, partition}, views);
  }
  json::array windows;
  for (std::size_t i = 0; i < views.size(); ++i) {
    const algorithms::LimitParams& p = limit.windows[i];
    json::object window;
    window["algorithm"] = algorithms::AlgorithmName(p.algorithm);
    window["limit"] = p.limit;
    window["window"] = rule.windows[i].text;
    window["remaining"] = views[i].remaining;
    window["reset_ms"] = views[i].reset_ms;
    window["retry_after_ms"] = views[i].retry_after_ms;
    window["state"] = AlgorithmState(p, views[i]);
    windows.emplace_back(std::move(window));
  }
  co_return windows;
}

Task<bool> AdminApi::ResetKey(std::string key, const store::LimitSpec& limit,
                              std::uint32_t partition) {
  if (redis_ != nullptr) {
    const Executor executor = co_await asio::this_coro::executor;
    StoreReply reply(executor);
    redis_->Reset(key, limit, reply);
    const store::StoreStatus status = co_await reply.Wait();
    if (status != store::StoreStatus::kOk) co_return false;
  }
  // With Redis too: the state on_error = "local" decided with.
  local_.Erase(key, partition);
  co_return true;
}

Task<Response> AdminApi::Keys(const http::request<http::string_body>& req, const Caller& caller) {
  const std::shared_ptr<const GatewayState> state = states_.Load();
  const rules::Config& config = *state->config;
  const KeyQuery query = ParseKeyQuery(config, QueryOf(req.target()));
  if (query.error == KeyQueryError::kUnknownRule) {
    co_return UnknownRule(config, query.field, query.message);
  }
  if (query.error == KeyQueryError::kBadField) {
    co_return Error(http::status::bad_request, "bad_request", query.field + ": " + query.message,
                    {{"field", query.field}});
  }
  const rules::RuleConfig& rule = *query.rule;
  const std::uint32_t partition = state->rule_set->partitions()[query.rule_index];
  // An override decides the key by its own limits, in a state of its own.
  const std::optional<AppliedOverride> applied = overrides_.Applied(rule, query.key);
  const rules::RuleConfig& decided = applied ? *applied->rule : rule;
  const std::string store_key = applied ? applied->store_key : query.key;
  json::object out;
  out["rule"] = rule.name;
  out["key"] = rules::DisplayKey(rule, query.key);
  out["store"] = redis_ != nullptr ? "redis" : "local";
  std::optional<json::array> windows = co_await ReadWindows(*state, decided, store_key, partition);
  if (!windows) co_return StoreUnavailable();
  if (req.method() == http::verb::delete_) {
    // Both states: the one under the rule's limits, and an override's.
    bool reset = co_await ResetKey(query.key, *rule.limit, partition);
    if (reset && applied) reset = co_await ResetKey(store_key, *decided.limit, partition);
    if (!reset) co_return StoreUnavailable();
    std::optional<json::array> after = co_await ReadWindows(*state, decided, store_key, partition);
    RecordChange(AdminChange::kReset, caller,
                 "rule=" + EscapeLogText(rule.name) + " key=\"" +
                     EscapeLogText(out["key"].as_string()) + "\"",
                 *windows, after ? json::value(std::move(*after)) : json::value());
    out["reset"] = true;
    co_return Json(http::status::ok, out);
  }
  bool limited = false;
  for (const json::value& w : *windows) limited = limited || w.at("retry_after_ms").as_int64() > 0;
  out["limited"] = limited;
  out["windows"] = std::move(*windows);
  // A rule that settles: the units this gateway reserved for requests of
  // the key whose responses have not ended (counted in the windows above).
  if (decided.budget.Settles() && state->reservations != nullptr) {
    out["reserved_in_flight"] = state->reservations->InFlight(store_key);
  }
  if (applied) out["override"] = AdminOverrides::DescribeApplied(*applied, clock_.UnixMs());
  // A block that applies to the key's parts refuses its requests first.
  if (const std::optional<rules::Block> block =
          blocks_.Matching(query.identity, query.headers)) {
    out["block"] = AdminBlocks::Describe(*block, clock_.UnixMs());
  }
  co_return Json(http::status::ok, out);
}

Task<Response> AdminApi::Overrides(const http::request<http::string_body>& req,
                                   const Caller& caller) {
  const std::shared_ptr<const GatewayState> state = states_.Load();
  const rules::Config& config = *state->config;
  const std::int64_t now = clock_.UnixMs();
  if (req.method() == http::verb::put) {
    AdminOverrides::Problem problem;
    std::optional<std::vector<AdminOverrides::Override>> parsed =
        AdminOverrides::Parse(req.body(), config, now, problem);
    if (!parsed) {
      if (problem.status == 404) co_return UnknownRule(config, problem.field, problem.message);
      co_return Error(http::status::bad_request, "bad_request",
                      problem.field + ": " + problem.message, {{"field", problem.field}});
    }
    const std::size_t first = req.body().find_first_not_of(" \t\r\n");
    const bool many = first != std::string::npos && req.body()[first] == '[';
    std::vector<std::string> ids;
    std::vector<json::value> before;
    for (const AdminOverrides::Override& o : *parsed) {
      ids.push_back(o.Id());
      const AdminOverrides::Override* was = overrides_.Find(ids.back());
      before.push_back(was != nullptr ? json::value(overrides_.Describe(*was, now)) : nullptr);
    }
    const bool stored = co_await overrides_.Put(std::move(*parsed));
    if (!stored) co_return StoreUnavailable();
    json::array shown;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const AdminOverrides::Override* now_set = overrides_.Find(ids[i]);
      json::value after =
          now_set != nullptr ? json::value(overrides_.Describe(*now_set, now)) : nullptr;
      RecordChange(AdminChange::kOverride, caller, "id=" + ids[i], before[i], after);
      shown.emplace_back(std::move(after));
    }
    if (many) co_return Json(http::status::ok, json::object{{"overrides", std::move(shown)}});
    co_return Json(http::status::ok, json::object{{"override", std::move(shown.front())}});
  }
  std::optional<std::vector<std::pair<std::string, std::string>>> params =
      QueryParams(QueryOf(req.target()));
  if (!params) {
    co_return Error(http::status::bad_request, "bad_request",
                    "query: the query is not valid percent-encoded text", {{"field", "query"}});
  }
  std::optional<std::string> rule;
  std::vector<std::pair<std::string, std::string>> parts;
  for (auto& [name, value] : *params) {
    if (name == "rule") {
      rule = std::move(value);
    } else {
      parts.emplace_back(std::move(name), std::move(value));
    }
  }
  if (req.method() == http::verb::delete_) {
    if (!rule) {
      co_return Error(http::status::bad_request, "bad_request",
                      "rule: missing: name the override by rule=NAME and its key's parts",
                      {{"field", "rule"}});
    }
    const std::string id = AdminOverrides::IdOf(*rule, std::move(parts));
    const AdminOverrides::Override* was = overrides_.Find(id);
    const json::value before =
        was != nullptr ? json::value(overrides_.Describe(*was, now)) : json::value(nullptr);
    const std::optional<bool> removed = co_await overrides_.Remove(id);
    if (!removed) co_return StoreUnavailable();
    if (!*removed) {
      co_return Error(http::status::not_found, "unknown_override",
                      "no override of rule \"" + *rule + "\" for this key", {{"field", "key"}});
    }
    RecordChange(AdminChange::kOverrideRemoved, caller, "id=" + id, before, nullptr);
    co_return Json(http::status::ok, json::object{{"removed", before}});
  }
  json::array list;
  for (const AdminOverrides::Override& o : overrides_.Current()) {
    if (!rule || o.rule == *rule) list.emplace_back(overrides_.Describe(o, now));
  }
  co_return Json(http::status::ok, json::object{{"overrides", std::move(list)}});
}

void AdminApi::RecordChange(AdminChange change, const Caller& caller, std::string_view what,
                            const json::value& before, const json::value& after) {
  if (metrics_ != nullptr) metrics_->RecordAdminChange(change);
  spdlog::info("admin change: {} {} by {} from {}; before: {}; after: {}",
               AdminChangeName(change), what, caller.who, caller.peer, json::serialize(before),
               json::serialize(after));
}

Task<Response> AdminApi::Handle(const http::request<http::string_body>& req,
                                std::string_view peer) {
  const http::verb method = req.method();
  const bool read = method == http::verb::get || method == http::verb::head;
  const std::shared_ptr<const GatewayState> state = states_.Load();
  const rules::Config& config = *state->config;
  switch (Authorize(config.admin.token, req[http::field::authorization], scope_,
                    read ? ApiAccess::kRead : ApiAccess::kChange)) {
    case AuthResult::kAllowed:
      break;
    case AuthResult::kUnauthorized: {
      Response res = Error(http::status::unauthorized, "unauthorized",
                           "this call needs \"Authorization: Bearer <token>\" with the admin token");
      res.set(http::field::www_authenticate, "Bearer");
      co_return res;
    }
    case AuthResult::kForbidden:
      co_return Error(http::status::forbidden, "forbidden",
                      scope_ == ListenerScope::kLoopback
                          ? "changes need an admin token: set [admin] token_env or token_file"
                          : "the admin API on a non-loopback address needs an admin token: set "
                            "[admin] token_env or token_file");
  }
  const std::string_view target = req.target();
  const std::string_view path = target.substr(0, target.find('?'));
  const Endpoint* endpoint = nullptr;
  for (const Endpoint& e : kEndpoints) {
    if (e.path == path) endpoint = &e;
  }
  if (endpoint == nullptr) {
    co_return Error(http::status::not_found, "not_found", "no such admin API endpoint");
  }
  if (!Answers(*endpoint, method)) {
    Response res = Error(http::status::method_not_allowed, "method_not_allowed",
                         "this endpoint answers " + AllowOf(*endpoint));
    res.set(http::field::allow, AllowOf(*endpoint));
    co_return res;
  }
  const Caller caller{config.admin.token.empty() ? std::string("no token")
                                                 : "token " + TokenFingerprint(config.admin.token),
                      std::string(peer)};
  if (endpoint->path == kKeysPath) {
    co_return co_await Keys(req, caller);
  }
  if (endpoint->path == kBlocksPath) {
    co_return co_await Blocks(req, caller);
  }
  if (endpoint->path == kOverridesPath) {
    co_return co_await Overrides(req, caller);
  }
  json::array rules;
  for (const rules::RuleConfig& rule : config.rules) rules.emplace_back(DescribeRule(rule));
  co_return Json(http::status::ok, json::object{{"rules", std::move(rules)}});
}

}  // namespace tollgate::gateway
