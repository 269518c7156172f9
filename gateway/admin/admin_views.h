// The JSON views the admin API answers with (docs/admin-api.md): a rule's
// configuration (GET /api/v1/rules) and a window's state as its algorithm
// keeps it (GET /api/v1/keys). Pure; thread-safe.
#pragma once

#include <boost/json/object.hpp>

#include "algorithms/decide.h"
#include "algorithms/limit.h"
#include "rules/config.h"

namespace tollgate::gateway {

// A rule as configured: its key, and its limits' windows, or max_inflight,
// or that it is exempt.
boost::json::object DescribeRule(const rules::RuleConfig& rule);

// A window's own state (WindowView): a bucket's level in units of
// window_ms per token (or queued request), what a window counts, a sliding
// log's length, two_bucket's two windows.
boost::json::object AlgorithmState(const algorithms::LimitParams& p,
                                   const algorithms::WindowView& v);

}  // namespace tollgate::gateway
