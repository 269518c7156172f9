// The upstream-facing steps of phase forward that every client protocol
// needs when it forwards to an HTTP/1.1 upstream: a connection from the
// pool (a pooled one at once when there is, and once more on a fresh
// connection when a pooled one turns out to have been closed by the
// upstream), the response head read past interim 1xx responses, and a
// failure classified into the answer and the upstream-failure metric.
// What goes over the wire in between (the request head and body, the
// response body) is each adapter's own: HTTP/1.1 relays bytes, HTTP/2
// moves them between frames. Heavy (Beast): gateway implementation files
// only. Worker thread only.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <utility>

#include "gateway/core/exchange.h"
#include "gateway/core/respond.h"
#include "gateway/io/net.h"
#include "gateway/io/upstream_pool.h"

namespace tollgate::gateway {

class ThreadMetrics;

using ResponseHead = ResponseParser<http::empty_body>;

// Which try of an upstream exchange: the first takes a pooled connection
// when there is one; the retry of a stale one connects afresh.
enum class Attempt { kFirst, kRetry };

// One request's exchange with an upstream server.
struct UpstreamCall {
  explicit UpstreamCall(UpstreamPool& upstream_pool) : pool(upstream_pool) {}

  UpstreamPool& pool;
  bool head_request = false;  // the response has no body whatever its fields say
  // Idempotent and not streamed: sent again on a fresh connection when a
  // reused one turns out closed (RetryOnFresh).
  bool replayable = false;
  std::unique_ptr<UpstreamConnection> conn;
};

// The connection for `attempt` when it needs no connect: a pooled one, on
// the first attempt only. No connection: co_await ConnectUpstream. Split in
// two so that the usual exchange costs no coroutine frame here.
ConnectResult TakePooled(UpstreamCall& call, Attempt attempt);
Task<ConnectResult> ConnectUpstream(UpstreamCall& call, Attempt attempt,
                                    std::int64_t connect_timeout_ms);

// Whether an exchange that failed with `ec` after `received` response
// bytes on call.conn goes once more on a fresh connection: a pooled
// connection the upstream closed while it sat idle, a request that is safe
// to send again, nothing of an answer read yet.
bool RetryOnFresh(const UpstreamCall& call, Attempt attempt, std::size_t received,
                  const ErrorCode& ec);

// Reads the response head from call.conn into `head`, past interim 1xx
// responses (101 is final), parsing what the connection's buffer holds in
// place and reading only the missing bytes, all within `timeout`. Returns
// the error, if any, and the bytes read from the upstream.
Task<std::pair<ErrorCode, std::size_t>> ReadResponseHead(
    UpstreamCall& call, std::optional<ResponseHead>& head,
    std::chrono::steady_clock::duration timeout);

// A failed exchange `ex` with an upstream of any protocol (`failure`
// connecting, or `ec` after): the refusal that answers it (504 on a
// timeout, else 502), counted in tollgate_upstream_errors_total for
// ex.upstream_metric (-1: metrics off). A failure to connect marks
// ex.upstream_unsent: the upstream never saw the request.
Refusal UpstreamFailed(ExchangeFacts& ex, ConnectFailure failure, const ErrorCode& ec,
                       ThreadMetrics* metrics);

}  // namespace tollgate::gateway
