#include "gateway/core/respond.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <cstring>
#include <boost/beast/http/status.hpp>

#include "gateway/core/exchange.h"
#include "gateway/core/request_id.h"

namespace tollgate::gateway {
namespace {

using enum GrpcStatus;

// One row per Refusal, in its order. The gRPC column: RESOURCE_EXHAUSTED
// for what a limit refused (the client may retry later), UNAVAILABLE for
// what may pass on a retry soon, DEADLINE_EXCEEDED for time running out,
// PERMISSION_DENIED for a block, and gRPC's own mapping of the HTTP status
// otherwise.
constexpr std::array<RefusalInfo, 17> kRefusals{{
    {"bad_request", 400, "malformed request", kInvalidArgument},
    {"header_too_large", 431, "request header exceeds the limit", kResourceExhausted},
    {"body_too_large", 413, "request body exceeds the limit", kResourceExhausted},
    {"request_timeout", 408, "request header not received in time", kDeadlineExceeded},
    {"not_implemented", 501, "this transfer coding is not implemented", kUnimplemented},
    {"no_route", 404, "no route matches this request", kUnimplemented},
    {"websocket_disabled", 400, "WebSocket is not enabled on this route", kInvalidArgument},
    {"unauthorized", 401, "the bearer token is not valid", kUnauthenticated},
    {"blocked", 403, "requests of this client are blocked", kPermissionDenied},
    {"store_unavailable", 503, "the rate-limit store is unavailable", kUnavailable},
    {"rate_limited", 429, "the rate limit is reached", kResourceExhausted},
    {"too_many_inflight", 429, "too many requests of this client are in flight",
     kResourceExhausted},
    {"cost_beyond_capacity", 429,
     "the request costs more than the rule's limit can ever allow: retrying will not help",
     kResourceExhausted},
    {"upstream_busy", 503, "too many requests are in flight to the upstream", kUnavailable},
    {"upstream_rate_limited", 429, "the upstream's rate limit is reached", kResourceExhausted},
    {"bad_gateway", 502, "the upstream is unavailable", kUnavailable},
    {"gateway_timeout", 504, "the upstream did not answer in time", kDeadlineExceeded},
}};
static_assert(kRefusals.size() == static_cast<std::size_t>(Refusal::kGatewayTimeout) + 1);

std::int64_t CeilSeconds(std::int64_t ms) { return (ms + 999) / 1000; }

// Responses are built with appends: fmt::format_to through a
// back_insert_iterator resizes (zero-fills) the string once per piece.
void AppendInt(std::int64_t value, std::string& out) {
  const fmt::format_int text(value);
  out.append(text.data(), text.size());
}

// A rule's name inside a quoted string: '"' and '\\' get a backslash, which
// is the escape of both a JSON string and an RFC 8941 string (the
// RateLimit fields). Names are printable ASCII (checked when the
// configuration is read), which both hold as they are otherwise.
bool Escaped(char c) { return c == '"' || c == '\\'; }

std::size_t EscapedNameSize(std::string_view name) {
  return name.size() + static_cast<std::size_t>(std::count_if(name.begin(), name.end(), Escaped));
}

// A message inside a JSON string: messages are tollgate's own text, but a
// quote, backslash or control character would still break the body.
void AppendJsonText(std::string_view text, std::string& out) {
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    } else {
      out += c;
    }
  }
}

// Writes into room reserved up front, through a raw pointer: the answer to a
// limited request would be ~30 appends to a string, each checking its
// capacity (docs/performance.md). `room` must bound what is written (checked
// in debug builds); the string is cut to what was written at the end.
class Writer {
 public:
  Writer(std::string& out, std::size_t room) : out_(out) {
    const std::size_t start = out.size();
    out.resize(start + room);
    p_ = out.data() + start;
    end_ = out.data() + out.size();
  }
  ~Writer() { out_.resize(static_cast<std::size_t>(p_ - out_.data())); }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  void Put(std::string_view s) {
    assert(s.size() <= static_cast<std::size_t>(end_ - p_));
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  void Put(char c) {
    assert(p_ < end_);
    *p_++ = c;
  }
  void PutInt(std::int64_t value) {
    const fmt::format_int text(value);
    Put(std::string_view(text.data(), text.size()));
  }
  void PutEscapedName(std::string_view name) {
    for (const char c : name) {
      if (Escaped(c)) Put('\\');
      Put(c);
    }
  }
  // The policy of window `i` as a structured-field string: the rule's name,
  // and ":" and the window as written when the rule has several.
  void PutPolicyName(const rules::RuleConfig& rule, std::size_t i) {
    Put('"');
    PutEscapedName(rule.name);
    if (rule.windows.size() > 1) {
      Put(':');
      Put(rule.windows[i].text);
    }
    Put('"');
  }

 private:
  std::string& out_;
  char* p_;
  char* end_;
};

// Bounds what the rate-limit fields of `rule` take: per window a policy
// (the name escaped, the window's text, two integers), the RateLimit field
// (the name escaped and a window's text once more, two integers) and the
// fixed text with three more integers. Window texts have no length bound
// ("0001s" is a duration too): each is counted as written.
std::size_t RateLimitHeadersRoom(const rules::RuleConfig& rule) {
  std::size_t longest_text = 0;
  std::size_t room = 256 + 2 * rule.name.size();
  for (const auto& window : rule.windows) {
    room += 2 * rule.name.size() + window.text.size() + 64;
    longest_text = std::max(longest_text, window.text.size());
  }
  return room + longest_text;
}

void PutRateLimitHeaders(const rules::RuleConfig& rule, const algorithms::Decision& d,
                         Writer& out) {
  const std::size_t w = std::min<std::size_t>(d.window, rule.windows.size() - 1);
  out.Put("RateLimit-Policy: ");
  for (std::size_t i = 0; i < rule.windows.size(); ++i) {
    if (i > 0) out.Put(", ");
    out.PutPolicyName(rule, i);
    out.Put(";q=");
    out.PutInt(rule.limit->windows[i].limit);
    out.Put(";w=");
    out.PutInt(rule.windows[i].seconds);
  }
  const std::int64_t reset_s = CeilSeconds(d.window_reset_ms);
  const std::int64_t remaining = std::max<std::int64_t>(0, d.remaining);
  out.Put("\r\nRateLimit: ");
  out.PutPolicyName(rule, w);
  out.Put(";r=");
  out.PutInt(remaining);
  out.Put(";t=");
  out.PutInt(reset_s);
  out.Put("\r\nX-RateLimit-Limit: ");
  out.PutInt(rule.limit->windows[w].limit);
  out.Put("\r\nX-RateLimit-Remaining: ");
  out.PutInt(remaining);
  out.Put("\r\nX-RateLimit-Reset: ");
  out.PutInt(reset_s);
  out.Put("\r\n");
}

// The body's last member, when there is an ID: ,"request_id":"<id>". IDs
// are visible ASCII (ValidRequestId): '"' and '\\' are all that need an
// escape.
constexpr std::string_view kRequestIdMember = R"(,"request_id":")";

std::size_t RequestIdMemberSize(std::string_view request_id) {
  return request_id.empty() ? 0 : kRequestIdMember.size() + EscapedNameSize(request_id) + 1;
}

void PutRequestIdMember(std::string_view request_id, Writer& out) {
  if (request_id.empty()) return;
  out.Put(kRequestIdMember);
  out.PutEscapedName(request_id);
  out.Put('"');
}

// {"error":"<code>","message":"<message>","status":<status>} and the
// request ID; returns its size.
std::size_t AppendErrorBody(const Answer& answer, std::string& out) {
  const std::size_t body_at = out.size();
  out += R"({"error":")";
  out += InfoOf(answer.refusal).code;
  out += R"(","message":")";
  AppendJsonText(answer.Message(), out);
  out += R"(","status":)";
  AppendInt(answer.Status(), out);
  if (!answer.request_id.empty()) {
    Writer writer(out, RequestIdMemberSize(answer.request_id));
    PutRequestIdMember(answer.request_id, writer);
  }
  out += "}\n";
  return out.size() - body_at;
}

constexpr std::string_view kLimitedBodyStart = R"({"error":"rate_limited","rule":")";
constexpr std::string_view kLimitedBodyRetry = R"(","retry_after_ms":)";
constexpr std::string_view kLimitedBodyEnd = "}\n";

std::size_t LimitedBodySize(const rules::RuleConfig& rule, const fmt::format_int& retry_after_ms,
                            std::string_view request_id) {
  return kLimitedBodyStart.size() + EscapedNameSize(rule.name) + kLimitedBodyRetry.size() +
         retry_after_ms.size() + RequestIdMemberSize(request_id) + kLimitedBodyEnd.size();
}

void PutLimitedBody(const rules::RuleConfig& rule, const fmt::format_int& retry_after_ms,
                    std::string_view request_id, Writer& out) {
  out.Put(kLimitedBodyStart);
  out.PutEscapedName(rule.name);
  out.Put(kLimitedBodyRetry);
  out.Put(std::string_view(retry_after_ms.data(), retry_after_ms.size()));
  PutRequestIdMember(request_id, out);
  out.Put(kLimitedBodyEnd);
}

}  // namespace

const RefusalInfo& InfoOf(Refusal refusal) { return kRefusals[static_cast<std::size_t>(refusal)]; }

Answer Refuse(Refusal refusal, std::int64_t retry_after_s) {
  Answer answer;
  answer.refusal = refusal;
  answer.retry_after_s = retry_after_s;
  return answer;
}

Answer RefuseWith(Refusal refusal, std::string_view message) {
  Answer answer = Refuse(refusal);
  answer.message = message;
  return answer;
}

Answer RefuseWithStatus(Refusal refusal, unsigned status, std::int64_t retry_after_s) {
  Answer answer = Refuse(refusal, retry_after_s);
  answer.status = status;
  return answer;
}

Answer Limited(const rules::RuleConfig& rule, const algorithms::Decision& decision) {
  Answer answer = RefuseWithStatus(Refusal::kRateLimited, rule.status, 0);
  answer.rule = &rule;
  answer.decision = decision;
  return answer;
}

bool RefuseBody(BodyFailure failure, Answer& answer) {
  switch (failure) {
    case BodyFailure::kTooLarge:
      answer = Refuse(Refusal::kBodyTooLarge);
      return true;
    case BodyFailure::kTimeout:
      answer = RefuseWith(Refusal::kRequestTimeout, kBodyTimeoutMessage);
      return true;
    case BodyFailure::kMalformed:
      answer = RefuseWith(Refusal::kBadRequest, kBadBodyMessage);
      return true;
    case BodyFailure::kClientGone:
      break;
  }
  return false;
}

std::size_t AppendAnswer(const Answer& answer, Persistence persistence, std::string& out) {
  if (answer.refusal == Refusal::kRateLimited && answer.rule != nullptr) {
    return AppendLimitedResponse(*answer.rule, answer.decision, persistence, out, answer.Status(),
                                 answer.request_id);
  }
  const unsigned status = answer.Status();
  out += "HTTP/1.1 ";
  AppendInt(status, out);
  out += ' ';
  out += std::string_view(boost::beast::http::obsolete_reason(
      static_cast<boost::beast::http::status>(status)));
  out += "\r\nServer: tollgate\r\nContent-Type: application/json\r\nContent-Length: ";
  // Its length goes here once the body behind the header is written.
  const std::size_t length_at = out.size();
  out += "\r\n";
  if (answer.retry_after_s > 0) {
    out += "Retry-After: ";
    AppendInt(answer.retry_after_s, out);
    out += "\r\n";
  }
  AppendRequestIdLine(answer.request_id, out);
  if (persistence == Persistence::kClose) out += "Connection: close\r\n";
  out += "\r\n";
  const std::size_t body_size = AppendErrorBody(answer, out);
  const fmt::format_int length(static_cast<std::int64_t>(body_size));
  out.insert(length_at, length.data(), length.size());
  return body_size;
}

void NoteAnswer(const Answer& answer, std::uint64_t body_bytes, Exchange& ex) {
  ex.status = answer.Status();
  ex.bytes_out = body_bytes;
  if (answer.refusal == Refusal::kRateLimited) {
    ex.retry_after_ms = answer.decision.retry_after_ms;
  } else {
    ex.error = InfoOf(answer.refusal).code;
  }
}

void AppendRateLimitHeaders(const rules::RuleConfig& rule, const algorithms::Decision& d,
                            std::string& out) {
  if (rule.headers == rules::RateLimitHeaders::kNone) return;
  Writer writer(out, RateLimitHeadersRoom(rule));
  PutRateLimitHeaders(rule, d, writer);
}

std::size_t AppendLimitedResponse(const rules::RuleConfig& rule, const algorithms::Decision& d,
                                  Persistence persistence, std::string& out, unsigned status,
                                  std::string_view request_id) {
  if (status == 0) status = rule.status;
  const fmt::format_int retry_after_ms(d.retry_after_ms);
  const std::size_t body_size = LimitedBodySize(rule, retry_after_ms, request_id);
  const std::string_view reason = boost::beast::http::obsolete_reason(
      static_cast<boost::beast::http::status>(status));
  // The status line and fixed fields (~150 bytes with the longest reason),
  // two integers, the ID's field, the rate-limit fields and the body.
  Writer writer(out, 256 + reason.size() + kRequestIdField.size() + request_id.size() +
                         RateLimitHeadersRoom(rule) + body_size);
  writer.Put("HTTP/1.1 ");
  writer.PutInt(status);
  writer.Put(' ');
  writer.Put(reason);
  writer.Put("\r\nServer: tollgate\r\nContent-Type: application/json\r\nRetry-After: ");
  writer.PutInt(std::max<std::int64_t>(1, CeilSeconds(d.retry_after_ms)));
  writer.Put("\r\nContent-Length: ");
  writer.PutInt(static_cast<std::int64_t>(body_size));
  writer.Put("\r\n");
  if (!request_id.empty()) {
    writer.Put(kRequestIdField);
    writer.Put(": ");
    writer.Put(request_id);
    writer.Put("\r\n");
  }
  if (persistence == Persistence::kClose) writer.Put("Connection: close\r\n");
  if (rule.headers != rules::RateLimitHeaders::kNone) PutRateLimitHeaders(rule, d, writer);
  writer.Put("\r\n");
  PutLimitedBody(rule, retry_after_ms, request_id, writer);
  return body_size;
}

std::size_t AppendAnswerBody(const Answer& answer, std::string& out) {
  if (answer.refusal == Refusal::kRateLimited && answer.rule != nullptr) {
    const fmt::format_int retry_after_ms(answer.decision.retry_after_ms);
    const std::size_t body_size =
        LimitedBodySize(*answer.rule, retry_after_ms, answer.request_id);
    Writer writer(out, body_size);
    PutLimitedBody(*answer.rule, retry_after_ms, answer.request_id, writer);
    return body_size;
  }
  return AppendErrorBody(answer, out);
}

std::int64_t RetryAfterSeconds(const Answer& answer) {
  if (answer.refusal == Refusal::kRateLimited && answer.rule != nullptr) {
    return std::max<std::int64_t>(1, CeilSeconds(answer.decision.retry_after_ms));
  }
  return std::max<std::int64_t>(0, answer.retry_after_s);
}

void AppendGrpcPercentEncoded(std::string_view text, std::string& out) {
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte > 0x7e || c == '%') {
      out += fmt::format("%{:02X}", static_cast<unsigned>(byte));
    } else {
      out += c;
    }
  }
}

void AppendGrpcMessage(const Answer& answer, std::string& out) {
  out += InfoOf(answer.refusal).code;
  if (answer.refusal == Refusal::kRateLimited && answer.rule != nullptr) {
    out += ": rule \"";
    AppendGrpcPercentEncoded(answer.rule->name, out);
    out += "\", retry after ";
    AppendInt(answer.decision.retry_after_ms, out);
    out += " ms";
    return;
  }
  out += ": ";
  AppendGrpcPercentEncoded(answer.Message(), out);
}

}  // namespace tollgate::gateway
