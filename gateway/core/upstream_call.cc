#include "gateway/core/upstream_call.h"

#include <boost/beast/core/read_size.hpp>

#include "gateway/io/read_util.h"
#include "gateway/telemetry/metrics.h"

namespace tollgate::gateway {
namespace {

constexpr std::uint32_t kUpstreamHeaderLimit = 64 * 1024;

bool IsStaleConnectionError(const ErrorCode& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe;
}

}  // namespace

namespace {
IdleCheck CheckFor(const UpstreamCall& call) {
  return call.replayable ? IdleCheck::kRecord : IdleCheck::kPeek;
}
}  // namespace

ConnectResult TakePooled(UpstreamCall& call, Attempt attempt) {
  if (attempt == Attempt::kRetry) return {};
  return call.pool.TakeIdle(CheckFor(call));
}

Task<ConnectResult> ConnectUpstream(UpstreamCall& call, Attempt attempt,
                                    std::int64_t connect_timeout_ms) {
  if (attempt == Attempt::kRetry) co_return co_await call.pool.ConnectFresh(connect_timeout_ms);
  co_return co_await call.pool.Acquire(connect_timeout_ms, CheckFor(call));
}

bool RetryOnFresh(const UpstreamCall& call, Attempt attempt, std::size_t received,
                  const ErrorCode& ec) {
  return attempt == Attempt::kFirst && call.conn->reused && call.replayable && received == 0 &&
         IsStaleConnectionError(ec);
}

Task<std::pair<ErrorCode, std::size_t>> ReadResponseHead(
    UpstreamCall& call, std::optional<ResponseHead>& head,
    std::chrono::steady_clock::duration timeout) {
  UpstreamConnection& c = *call.conn;
  std::size_t received = 0;  // bytes read from the upstream
  bool deadline_set = false;
  for (;;) {
    head.emplace();
    head->header_limit(kUpstreamHeaderLimit);
    head->body_limit(boost::none);
    if (call.head_request) head->skip(true);
    // Beast's async_read_header would do the same in two composed layers,
    // each tracking work on the executor: here the header is parsed in
    // place and only the missing bytes are read, under one deadline.
    ErrorCode ec;
    while (!ParseBuffered(c.buffer, *head, ec, ParseUntil::kHeader)) {
      if (!deadline_set) {
        Lowest(c.stream).expires_after(timeout);
        deadline_set = true;
      }
      // The parser's header_limit bounds what is kept; reads are sized as
      // Beast's own.
      const std::size_t room = beast::read_size(c.buffer, kUpstreamHeaderLimit);
      auto [read_ec, n] = co_await Visit(
          c.stream, [&](auto& s) { return s.async_read_some(c.buffer.prepare(room), kUseTuple); });
      if (read_ec == asio::error::eof) {
        // As Beast's read: a header cut short is a partial message, no
        // header at all the end of the stream.
        ec = head->got_some() ? ErrorCode(http::error::partial_message)
                              : ErrorCode(http::error::end_of_stream);
        break;
      }
      if (read_ec) {
        ec = read_ec;
        break;
      }
      c.buffer.commit(n);
      received += n;
    }
    if (ec) co_return std::pair{ec, received};
    const unsigned status = head->get().result_int();
    if (status < 100 || status >= 200 || status == 101) co_return std::pair{ErrorCode{}, received};
  }
}

Refusal UpstreamFailed(ExchangeFacts& ex, ConnectFailure failure, const ErrorCode& ec,
                       ThreadMetrics* metrics) {
  const bool timeout = failure == ConnectFailure::kTimeout || ec == beast::error::timeout;
  ex.upstream_unsent = failure != ConnectFailure::kNone;
  if (metrics != nullptr && ex.upstream_metric >= 0) {
    metrics->RecordUpstreamFailure(ex.upstream_metric, timeout ? UpstreamFailure::kTimeout
                                                       : failure == ConnectFailure::kRefused
                                                           ? UpstreamFailure::kConnect
                                                           : UpstreamFailure::kReset);
  }
  return timeout ? Refusal::kGatewayTimeout : Refusal::kBadGateway;
}

}  // namespace tollgate::gateway
