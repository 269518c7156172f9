// Phase respond: every answer tollgate writes itself instead of the
// upstream's — a limited request's 429, a malformed request's 400, an
// upstream failure's 502 — as a value (Answer) built in one place, from one
// table of refusals (their status, error code, message and gRPC status),
// and rendered by each protocol adapter: AppendAnswer is HTTP/1.1's, the
// pieces below it (body, Retry-After, grpc-message) HTTP/2's. Also what a client sees
// of a rule's decision on any response: the IETF RateLimit/RateLimit-Policy
// fields and the common X-RateLimit-* fields. Pure; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "rules/rule.h"

namespace tollgate::gateway {

struct Exchange;

// Why tollgate answers a request itself. Each has one row in the table
// behind InfoOf (status, code, message, gRPC status).
enum class Refusal : std::uint8_t {
  kBadRequest,           // 400 malformed request or body
  kHeaderTooLarge,       // 431
  kBodyTooLarge,         // 413
  kRequestTimeout,       // 408 header or body not received in time
  kNotImplemented,       // 501 what is not offered: a transfer coding other than
                         // chunked, CONNECT, WebSocket to an HTTP/2 upstream
  kNoRoute,              // 404
  kWebSocketDisabled,    // 400 a handshake on a route with websocket = false
  kUnauthorized,         // 401 an invalid bearer token (jwt on_invalid = "reject")
  kBlocked,              // the block's status (403): blocked through the admin API
  kStoreUnavailable,     // 503 on_error = "deny" while the store cannot decide
  kRateLimited,          // the rule's status (429): a rate rule limited it
  kTooManyInflight,      // the rule's status: a max_inflight rule refused it
  kCostBeyondCapacity,   // the rule's status (429): the request's cost is more
                         // than the rule's limit can ever allow (no Retry-After)
  kUpstreamBusy,         // the upstream's max_connections_status
  kUpstreamRateLimited,  // 429 the upstream's learned limit would refuse it
  kBadGateway,           // 502
  kGatewayTimeout,       // 504
};

// gRPC status codes (grpc-status) that tollgate's answers use.
enum class GrpcStatus : std::uint8_t {
  kOk = 0,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kResourceExhausted = 8,
  kPermissionDenied = 7,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kUnauthenticated = 16,
};

struct RefusalInfo {
  std::string_view code;     // the body's "error"
  unsigned status;           // unless the Answer names another
  std::string_view message;  // the body's "message", unless the Answer names another
  GrpcStatus grpc;           // the answer to a gRPC call (HTTP 200, trailers only)
};
const RefusalInfo& InfoOf(Refusal refusal);

// A response tollgate writes itself.
struct Answer {
  Refusal refusal = Refusal::kBadRequest;
  unsigned status = 0;        // 0: the refusal's own
  std::string_view message;   // empty: the refusal's own; static storage
  std::int64_t retry_after_s = 0;  // > 0: Retry-After
  // kRateLimited: the rule that limited and its decision (Retry-After, the
  // rate-limit fields and the body come from them).
  const rules::RuleConfig* rule = nullptr;
  algorithms::Decision decision;
  // The request's ID (gateway/core/request_id.h), for the X-Request-Id
  // field and the body's "request_id"; empty: neither. The adapter sets it
  // before rendering; it refers to the exchange's storage.
  std::string_view request_id;

  unsigned Status() const { return status != 0 ? status : InfoOf(refusal).status; }
  std::string_view Message() const { return message.empty() ? InfoOf(refusal).message : message; }
};

// The usual ways to build one.
Answer Refuse(Refusal refusal, std::int64_t retry_after_s = 0);
Answer RefuseWith(Refusal refusal, std::string_view message);
Answer RefuseWithStatus(Refusal refusal, unsigned status, std::int64_t retry_after_s);
Answer Limited(const rules::RuleConfig& rule, const algorithms::Decision& decision);

// The messages of the answers about a client's request body, the same in
// every protocol.
inline constexpr std::string_view kBodyTimeoutMessage = "request body not received in time";
inline constexpr std::string_view kBadBodyMessage = "malformed request body";

// How reading a client's request body failed, in any protocol: each
// adapter knows which of its errors is which; the answers are RefuseBody's.
enum class BodyFailure : std::uint8_t { kTooLarge, kTimeout, kMalformed, kClientGone };
// The answer to `failure` into `answer`: 413, 408 or 400; false for
// kClientGone, which has nobody to answer.
bool RefuseBody(BodyFailure failure, Answer& answer);

enum class Persistence { kKeepAlive, kClose };

// Appends `answer` as a whole HTTP/1.1 response (header and body) to `out`;
// returns the body's size. Errors:
// {"error":"<code>","message":"<message>","status":<status>,
// "request_id":"<id>"} as JSON, with Server, Content-Type, Content-Length,
// Retry-After, X-Request-Id and Connection: close as the case may be. kRateLimited: AppendLimitedResponse.
std::size_t AppendAnswer(const Answer& answer, Persistence persistence, std::string& out);

// The pieces of an answer for adapters that frame their own fields (HTTP/2):
// AppendAnswer's JSON body (AppendLimitedResponse's for kRateLimited);
// returns its size.
std::size_t AppendAnswerBody(const Answer& answer, std::string& out);
// Retry-After in seconds; 0: none.
std::int64_t RetryAfterSeconds(const Answer& answer);
// The grpc-message of `answer` as a gRPC call's status, percent-encoded as
// gRPC's HTTP/2 mapping requires: "<code>: <message>", and for a limited
// call the rule and the wait (rate_limited: rule "anonymous", retry after
// 52280 ms).
void AppendGrpcMessage(const Answer& answer, std::string& out);
// `text` percent-encoded as grpc-message requires (bytes outside
// 0x20..0x7E, and '%'), appended to `out`.
void AppendGrpcPercentEncoded(std::string_view text, std::string& out);

// What answering `answer` with a body of `body_bytes` means for the access
// log and metrics: its status and size, and its error code (a limited
// request's is left as admit set it) or announced wait.
void NoteAnswer(const Answer& answer, std::uint64_t body_bytes, Exchange& ex);

// Appends the rate-limit fields for `rule`'s decision as header lines
// ("Name: value\r\n"): RateLimit-Policy, RateLimit, X-RateLimit-*.
void AppendRateLimitHeaders(const rules::RuleConfig& rule, const algorithms::Decision& decision,
                            std::string& out);

// Appends the whole answer to a limited request: the rule's status,
// Retry-After, X-Request-Id (unless `request_id` is empty), the rate-limit
// fields and the JSON body
// {"error":"rate_limited","rule":...,"retry_after_ms":...,"request_id":...}.
// Returns the body's size. `status`: 0 for the rule's own (the check
// endpoint's deny_status replaces it).
std::size_t AppendLimitedResponse(const rules::RuleConfig& rule,
                                  const algorithms::Decision& decision, Persistence persistence,
                                  std::string& out, unsigned status = 0,
                                  std::string_view request_id = {});

}  // namespace tollgate::gateway
