// Readers of where requests go: [[upstreams]] and [[routes]]. Used by
// LoadConfig*(); report into the ErrorList.
#pragma once

#include <vector>

#include "rules/config.h"
#include "rules/config_reader.h"

namespace tollgate::rules {

void ReadUpstream(TableReader r, std::vector<UpstreamConfig>& out);
// `upstreams`: those read before, which the route's upstream must name.
void ReadRoute(TableReader r, const std::vector<UpstreamConfig>& upstreams,
               std::vector<RouteConfig>& out);

}  // namespace tollgate::rules
