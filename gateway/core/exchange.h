// The per-request context that every phase of the pipeline reads and
// writes (identify -> admit -> forward -> respond -> log): what the request
// was, what the limits decided and hold for it, and what happened, for the
// access log and metrics. One per request in flight; used on its worker
// thread only. Free of Asio and Beast.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/core/fair_places.h"
#include "gateway/core/limits.h"
#include "store/inflight.h"

namespace tollgate::gateway {

class AdaptiveUpstream;
class ResponseBodyObserver;

// Every field of an Exchange but the strings (Exchange::Reset assigns a
// fresh one).
struct ExchangeFacts {
  std::int64_t start_ms = 0;
  std::int64_t deadline_ms = 0;  // timeouts.request from the start
  unsigned version = 11;
  unsigned status = 0;
  std::uint64_t bytes_in = 0;
  std::uint64_t bytes_out = 0;
  std::int64_t upstream_start_ms = -1;
  std::int64_t upstream_end_ms = -1;
  // Metrics: real time (sub-millisecond), whatever Clock the gateway runs on.
  std::chrono::steady_clock::time_point started;
  std::chrono::steady_clock::time_point upstream_started;
  std::chrono::steady_clock::time_point upstream_ended;
  std::int64_t retry_after_ms = -1;  // announced to a limited client
  // A settling rule's units: reserved (-1: none) and settled from the
  // response (-1: it did not say), for the access log.
  std::int64_t cost_reserved = -1;
  std::int64_t cost_settled = -1;
  int route_metric = -1;             // metric id of the route; -1: no route matched
  int upstream_metric = -1;          // metric id of the upstream asked; -1: none
  // Into the exchange's configuration and upstream pool, which the adapter
  // holds until the exchange is logged.
  std::string_view route;
  std::string_view upstream;
  // Sees the upstream response's body (gateway/core/response_filter.h);
  // null: nothing does. Not owned.
  ResponseBodyObserver* body_observer = nullptr;
  // The adaptive upstream (gateway/core/adaptive_upstream.h) whose place
  // the exchange holds, until its sample is taken; null: none. Not owned:
  // the exchange's configuration holds it.
  AdaptiveUpstream* adaptive = nullptr;
  // Its places held, this exchange's included, when it got its own.
  std::int64_t adaptive_inflight = 0;
  // No connection to the upstream could be made: it never saw the request
  // (UpstreamFailed), so what its rules reserved goes back.
  bool upstream_unsent = false;
  // The route's priority for the request's waits (a rule's wins).
  rules::Priority priority = rules::Priority::kNormal;
  bool close = false;  // the connection ends after this exchange
};

struct Exchange : ExchangeFacts {
  std::string method;
  std::string target;
  std::string user_agent;
  std::string referer;
  std::string limit_key;  // kind of the shown rule's key
  std::string error;
  std::string ratelimit;
  // X-Request-Id (gateway/core/request_id.h); empty until identify or an
  // answer gives it one.
  std::string request_id;
  // What admit decided, and the places it holds (max_inflight rules, the
  // upstream's max_connections) until Release().
  LimitOutcome limits;
  std::optional<FairPlaces::Place> upstream_place;

  // A fresh exchange whose strings keep their storage (assigning a new
  // Exchange would move eight strings per request).
  void Reset() {
    static_cast<ExchangeFacts&>(*this) = ExchangeFacts();
    for (std::string* s :
         {&method, &target, &user_agent, &referer, &limit_key, &error, &ratelimit, &request_id}) {
      s->clear();
    }
  }
  // The exchange has ended: its places go back.
  void Release() {
    limits = LimitOutcome();
    upstream_place.reset();
  }
};

}  // namespace tollgate::gateway
