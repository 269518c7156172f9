// A request waiting for a place of an upstream under its concurrency limit
// (fixed or adaptive): queued in FairPlaces' fair order by its flow (its
// client), woken by the place itself when its turn comes, or refused when
// max_connections_delay
// passes. Heavy (Asio): gateway implementation files only. Worker thread
// only; FairPlaces is shared by every worker.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gateway/io/io_types.h"

namespace tollgate::rules {
struct Identity;
struct UpstreamConfig;
}  // namespace tollgate::rules

namespace tollgate::gateway {

class FairPlaces;
struct WaitClass;
class ThreadMetrics;
struct Exchange;

// The flow a waiting request belongs to: a hash of its client (its user,
// else its address, or what a trusted proxy named it).
std::uint64_t FlowOf(const rules::Identity& identity);

// Waits up to upstream.max_connections_delay for a place of `upstream` in
// `places`, whose limit is `max` now (at most `max_waiting` requests wait,
// per flow and in all), in the fair order as `wait_class` says, counted in
// tollgate_delayed_requests meanwhile (`metrics`: null when off). True with
// the place in ex.upstream_place.
Task<bool> WaitForUpstreamPlace(FairPlaces& places, const rules::UpstreamConfig& upstream,
                                std::int64_t max, std::size_t max_waiting,
                                const WaitClass& wait_class, ThreadMetrics* metrics, Exchange& ex);

}  // namespace tollgate::gateway
