// `tollgate replay --sync lease --gateways N`: the trace decided by a fleet
// of N simulated gateways that take, spend and give back leases as
// LeasingStore does (the same policy: store/lease_hand.h) against the C++
// text of the lease scripts (algorithms/lease.h) on the trace's clock, row
// by row next to one exact store, so that a user can see on their own
// traffic what leasing under-admits before turning it on. Rows go to the
// gateways round-robin, or to the one their `gateway` column names.
#pragma once

#include <iosfwd>

#include "gateway/tools/replay.h"

namespace tollgate::gateway {

// Input as RunReplay's, with an optional fourth column `gateway` (0 to
// N - 1). Output: `t_ms,key,cost,gateway,decision,exact_decision` rows;
// per gateway, per key and fleet totals go to `err`. Preconditions:
// options.lease is set. Returns the process exit code, as RunReplay.
int RunLeaseReplay(const ReplayOptions& options, std::istream& in, std::ostream& out,
                   std::ostream& err);

}  // namespace tollgate::gateway
