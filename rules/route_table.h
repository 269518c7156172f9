// Chooses the route of a request: among the routes whose host matches (or
// that name no host), the one with the longest path_prefix; a route naming
// the host wins a tie. Immutable after construction; thread-safe.
#pragma once

#include <string_view>
#include <vector>

#include "rules/config.h"

namespace tollgate::rules {

class RouteTable {
 public:
  explicit RouteTable(const std::vector<RouteConfig>& routes);
  // `host` may carry a port, which is ignored; case-insensitive. `target` is
  // the request target (origin form; the query is ignored). nullptr: none.
  const RouteConfig* Match(std::string_view host, std::string_view target) const;

 private:
  std::vector<const RouteConfig*> ordered_;  // most specific first
};

// "Example.COM:8080" -> "Example.COM": the name without its port (IPv6
// literals keep their brackets); a view into `host`, no copy.
std::string_view HostName(std::string_view host);

// `host`'s name (HostName) equals `name`, ignoring ASCII case: how a route's
// or rule's host matches a request's Host, with no allocation.
bool SameHostName(std::string_view host, std::string_view name);

}  // namespace tollgate::rules
