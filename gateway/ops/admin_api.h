// The admin API: JSON calls under /api/v1/ on the admin listener (README,
// "Admin API"). Every call is authorized first (gateway/ops/admin_auth.h);
// errors are JSON objects {"error","message","status"} with a "field" when
// one part of the call is wrong and the list of "rules" when the rule named
// is unknown. Answers from the configuration in force and the configured
// store (local or Redis: the same answer). Runs on the admin
// listener's thread; not thread-safe.
#pragma once

#include "gateway/io/net.h"
#include "gateway/ops/admin_auth.h"

namespace tollgate::store {
class Clock;
class LocalStore;
class RedisStore;
}  // namespace tollgate::store

namespace tollgate::gateway {

class AdminBlocks;
class StateSource;

class AdminApi {
 public:
  // `states` and the stores must outlive the API. `redis`: with [store] kind
  // = "redis", a RedisStore of the admin listener's own (on its thread),
  // else null; `local` is the process's local store (with Redis: the
  // fallback of on_error = "local").
  AdminApi(const StateSource& states, ListenerScope scope, store::LocalStore& local,
           store::RedisStore* redis, AdminBlocks& blocks, const store::Clock& clock);

  // Answers one call whose target starts with kPrefix.
  static constexpr std::string_view kPrefix = "/api/";
  Task<http::response<http::string_body>> Handle(const http::request<http::string_body>& req);

 private:
  // GET and DELETE /api/v1/keys.
  Task<http::response<http::string_body>> Keys(const http::request<http::string_body>& req);
  // GET, PUT and DELETE /api/v1/blocks.
  Task<http::response<http::string_body>> Blocks(const http::request<http::string_body>& req);

  const StateSource& states_;
  const ListenerScope scope_;
  store::LocalStore& local_;
  store::RedisStore* redis_;
  AdminBlocks& blocks_;
  const store::Clock& clock_;
};

}  // namespace tollgate::gateway
