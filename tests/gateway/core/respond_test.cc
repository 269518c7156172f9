// What a client sees of tollgate's own answers, byte for byte: the whole
// answer to a limited request (AppendLimitedResponse) and the rate-limit
// header lines of an allowed one (AppendRateLimitHeaders), for rules of one
// and of several windows, every `headers` setting, other statuses and names
// that JSON must escape; the error answers (AppendAnswer) and what they
// note for the access log (NoteAnswer); the pieces HTTP/2 renders them
// from (body, Retry-After, the gRPC status and message).
#include "gateway/core/respond.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "gateway/core/exchange.h"
#include "rules/config.h"
#include "test_support.h"

namespace tollgate::gateway {
namespace {

// The first rule of a basic configuration with `rules`.
class Rule {
 public:
  explicit Rule(const std::string& rules) {
    loaded_ =
        rules::LoadConfigText(testing::WithEchoPort(testing::BasicConfig(rules), 9), "t.toml");
    if (!loaded_.config) ADD_FAILURE() << loaded_.errors[0].ToString();
  }
  const rules::RuleConfig& get() const { return loaded_.config->rules[0]; }

 private:
  rules::LoadResult loaded_;
};

algorithms::Decision Limited(std::int64_t retry_after_ms, std::int64_t reset_ms,
                             std::size_t window = 0) {
  algorithms::Decision d;
  d.allowed = false;
  d.remaining = 0;
  d.retry_after_ms = retry_after_ms;
  d.window_reset_ms = reset_ms;
  d.window = static_cast<std::uint8_t>(window);
  return d;
}

algorithms::Decision Allowed(std::int64_t remaining, std::int64_t reset_ms,
                             std::size_t window = 0) {
  algorithms::Decision d;
  d.allowed = true;
  d.remaining = remaining;
  d.window_reset_ms = reset_ms;
  d.window = static_cast<std::uint8_t>(window);
  return d;
}

std::string LimitedResponse(const rules::RuleConfig& rule, const algorithms::Decision& d,
                            Persistence persistence, std::size_t* body_size = nullptr) {
  std::string out = "(before)";
  const std::size_t size = AppendLimitedResponse(rule, d, persistence, out);
  if (body_size != nullptr) *body_size = size;
  return out;
}

TEST(LimitedResponse, OneWindowWithEveryHeader) {
  const Rule rule(R"(
[[rules]]
name = "per-ip"
key = "ip"
algorithm = "fixed_window"
limit = 20
window = "1m"
)");
  std::size_t body_size = 0;
  EXPECT_EQ(LimitedResponse(rule.get(), Limited(52280, 52280), Persistence::kKeepAlive, &body_size),
            "(before)"
            "HTTP/1.1 429 Too Many Requests\r\n"
            "Server: tollgate\r\n"
            "Content-Type: application/json\r\n"
            "Retry-After: 53\r\n"
            "Content-Length: 64\r\n"
            "RateLimit-Policy: \"per-ip\";q=20;w=60\r\n"
            "RateLimit: \"per-ip\";r=0;t=53\r\n"
            "X-RateLimit-Limit: 20\r\n"
            "X-RateLimit-Remaining: 0\r\n"
            "X-RateLimit-Reset: 53\r\n"
            "\r\n"
            "{\"error\":\"rate_limited\",\"rule\":\"per-ip\",\"retry_after_ms\":52280}\n");
  EXPECT_EQ(body_size, 64u);
}

TEST(LimitedResponse, ClosingWithoutHeadersAndAnotherStatus) {
  const Rule rule(R"(
[[rules]]
name = "quiet"
key = "ip"
algorithm = "token_bucket"
limit = 100
window = "1s"
burst = 10
status = 503
headers = "none"
)");
  EXPECT_EQ(LimitedResponse(rule.get(), Limited(9, 9), Persistence::kClose),
            "(before)"
            "HTTP/1.1 503 Service Unavailable\r\n"
            "Server: tollgate\r\n"
            "Content-Type: application/json\r\n"
            "Retry-After: 1\r\n"
            "Content-Length: 59\r\n"
            "Connection: close\r\n"
            "\r\n"
            "{\"error\":\"rate_limited\",\"rule\":\"quiet\",\"retry_after_ms\":9}\n");
}

TEST(LimitedResponse, NginxStatusAndANameThatJsonAndStructuredFieldsEscape) {
  const Rule rule(R"(
[[rules]]
name = "a\"b\\c"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
status = 499
headers = "limited"
)");
  EXPECT_EQ(LimitedResponse(rule.get(), Limited(0, 1000), Persistence::kKeepAlive),
            "(before)"
            "HTTP/1.1 499 Client Closed Request\r\n"
            "Server: tollgate\r\n"
            "Content-Type: application/json\r\n"
            "Retry-After: 1\r\n"
            "Content-Length: 61\r\n"
            "RateLimit-Policy: \"a\\\"b\\\\c\";q=1;w=1\r\n"
            "RateLimit: \"a\\\"b\\\\c\";r=0;t=1\r\n"
            "X-RateLimit-Limit: 1\r\n"
            "X-RateLimit-Remaining: 0\r\n"
            "X-RateLimit-Reset: 1\r\n"
            "\r\n"
            "{\"error\":\"rate_limited\",\"rule\":\"a\\\"b\\\\c\",\"retry_after_ms\":0}\n");
}

TEST(LimitedResponse, SeveralWindowsNameTheWindowThatLimited) {
  const Rule rule(R"(
[[rules]]
name = "per-user"
key = "ip"
algorithm = "sliding_log"
limits = [ { limit = 100, window = "1m" }, { limit = 1000, window = "1h" } ]
)");
  EXPECT_EQ(LimitedResponse(rule.get(), Limited(2999001, 2999001, 1), Persistence::kKeepAlive),
            "(before)"
            "HTTP/1.1 429 Too Many Requests\r\n"
            "Server: tollgate\r\n"
            "Content-Type: application/json\r\n"
            "Retry-After: 3000\r\n"
            "Content-Length: 68\r\n"
            "RateLimit-Policy: \"per-user:1m\";q=100;w=60, \"per-user:1h\";q=1000;w=3600\r\n"
            "RateLimit: \"per-user:1h\";r=0;t=3000\r\n"
            "X-RateLimit-Limit: 1000\r\n"
            "X-RateLimit-Remaining: 0\r\n"
            "X-RateLimit-Reset: 3000\r\n"
            "\r\n"
            "{\"error\":\"rate_limited\",\"rule\":\"per-user\",\"retry_after_ms\":2999001}\n");
}

// The answer is written into room reserved up front: the longest parts (a
// long name that is all escapes, several windows, large integers)
// still fit, and Content-Length is the body's size.
TEST(LimitedResponse, ALongEscapedNameAndSeveralWindows) {
  const std::string name(120, '"');
  std::string escaped_toml;
  for (std::size_t i = 0; i < name.size(); ++i) escaped_toml += "\\\"";
  const Rule rule(
      "[[rules]]\nname = \"" + escaped_toml +
      "\"\nkey = \"ip\"\n"
      "algorithm = \"fixed_window\"\n"
      "limits = [ { limit = 1000000, window = \"1s\" }, { limit = 2000000, window = \"1m\" },"
      " { limit = 3000000, window = \"1h\" }, { limit = 4000000, window = \"24h\" } ]\n");
  algorithms::Decision d = Limited(std::numeric_limits<std::int64_t>::max() / 2, 86'400'000, 3);
  d.remaining = std::numeric_limits<std::int64_t>::max();
  std::size_t body_size = 0;
  const std::string out = LimitedResponse(rule.get(), d, Persistence::kClose, &body_size);
  const std::size_t blank = out.find("\r\n\r\n");
  ASSERT_NE(blank, std::string::npos);
  EXPECT_EQ(out.size() - blank - 4, body_size);
  EXPECT_NE(out.find("Content-Length: " + std::to_string(body_size) + "\r\n"), std::string::npos);
  EXPECT_NE(out.find(":24h\";r=" + std::to_string(d.remaining)), std::string::npos);
  EXPECT_EQ(out.back(), '\n');
}

// Window texts are written as configured, in RateLimit-Policy and once more
// in RateLimit: zero-padded durations of 300 characters fit too.
TEST(LimitedResponse, LongWindowTexts) {
  const std::string zeros(300, '0');
  const Rule rule(
      "[[rules]]\nname = \"a\"\nkey = \"ip\"\nalgorithm = \"fixed_window\"\n"
      "limits = [ { limit = 5, window = \"" +
      zeros + "1s\" }, { limit = 9, window = \"" + zeros + "1m\" } ]\n");
  std::size_t body_size = 0;
  const std::string out =
      LimitedResponse(rule.get(), Limited(1000, 1000, 1), Persistence::kKeepAlive, &body_size);
  EXPECT_NE(out.find("RateLimit: \"a:" + zeros + "1m\";r=0;t=1\r\n"), std::string::npos);
  EXPECT_EQ(out.size() - out.find("\r\n\r\n") - 4, body_size);
  std::string fields;
  AppendRateLimitHeaders(rule.get(), Allowed(3, 1000, 0), fields);
  EXPECT_NE(fields.find("RateLimit: \"a:" + zeros + "1s\";r=3;t=1\r\n"), std::string::npos)
      << fields;
}

TEST(RateLimitHeaders, AllowedRequestOfAOneWindowRule) {
  const Rule rule(R"(
[[rules]]
name = "per-ip"
key = "ip"
algorithm = "token_bucket"
limit = 1000
window = "1m"
)");
  std::string out = "X: y\r\n";
  AppendRateLimitHeaders(rule.get(), Allowed(999, 60), out);
  EXPECT_EQ(out,
            "X: y\r\n"
            "RateLimit-Policy: \"per-ip\";q=1000;w=60\r\n"
            "RateLimit: \"per-ip\";r=999;t=1\r\n"
            "X-RateLimit-Limit: 1000\r\n"
            "X-RateLimit-Remaining: 999\r\n"
            "X-RateLimit-Reset: 1\r\n");
}

TEST(RateLimitHeaders, NegativeRemainingShowsZeroAndNoneWritesNothing) {
  const Rule rule(R"(
[[rules]]
name = "r"
key = "ip"
algorithm = "fixed_window"
limits = [ { limit = 5, window = "1s" }, { limit = 50, window = "1d" } ]
)");
  // Window 7 is past the last one: the last one is shown.
  const algorithms::Decision d = Allowed(-3, 0, 7);
  std::string out;
  AppendRateLimitHeaders(rule.get(), d, out);
  EXPECT_EQ(out,
            "RateLimit-Policy: \"r:1s\";q=5;w=1, \"r:1d\";q=50;w=86400\r\n"
            "RateLimit: \"r:1d\";r=0;t=0\r\n"
            "X-RateLimit-Limit: 50\r\n"
            "X-RateLimit-Remaining: 0\r\n"
            "X-RateLimit-Reset: 0\r\n");

  const Rule none(R"(
[[rules]]
name = "n"
key = "ip"
algorithm = "fixed_window"
limit = 5
window = "1s"
headers = "none"
)");
  std::string nothing;
  AppendRateLimitHeaders(none.get(), d, nothing);
  EXPECT_EQ(nothing, "");
}

TEST(Answer, AnErrorWithRetryAfterOnAClosingConnection) {
  std::string out = "(before)";
  const std::size_t body =
      AppendAnswer(Refuse(Refusal::kStoreUnavailable, 1), Persistence::kClose, out);
  const std::string json =
      R"({"error":"store_unavailable","message":"the rate-limit store is unavailable","status":503})"
      "\n";
  EXPECT_EQ(out,
            "(before)"
            "HTTP/1.1 503 Service Unavailable\r\n"
            "Server: tollgate\r\n"
            "Content-Type: application/json\r\n"
            "Content-Length: " +
                std::to_string(json.size()) +
                "\r\n"
                "Retry-After: 1\r\n"
                "Connection: close\r\n"
                "\r\n" +
                json);
  EXPECT_EQ(body, json.size());
}

TEST(Answer, AnotherStatusAndMessageEscapedInJson) {
  std::string out;
  AppendAnswer(RefuseWithStatus(Refusal::kTooManyInflight, 503, 0), Persistence::kKeepAlive, out);
  EXPECT_EQ(out.substr(0, out.find("\r\n")), "HTTP/1.1 503 Service Unavailable");
  EXPECT_EQ(out.find("Connection:"), std::string::npos);
  EXPECT_EQ(out.find("Retry-After:"), std::string::npos);
  out.clear();
  AppendAnswer(RefuseWith(Refusal::kBadRequest, "a \"quoted\\ text\x01"), Persistence::kKeepAlive,
               out);
  EXPECT_NE(out.find(R"("message":"a \"quoted\\ text\u0001")"), std::string::npos) << out;
}

// The request's ID: an X-Request-Id field and the body's last member,
// '"' and '\\' escaped (a trusted proxy's ID may hold them).
TEST(Answer, TheRequestIdInTheFieldAndTheBody) {
  Answer answer = Refuse(Refusal::kBadGateway);
  answer.request_id = "0123456789abcdef0123456789abcdef";
  std::string out;
  const std::size_t body = AppendAnswer(answer, Persistence::kKeepAlive, out);
  const std::string json =
      R"({"error":"bad_gateway","message":"the upstream is unavailable","status":502,)"
      R"("request_id":"0123456789abcdef0123456789abcdef"})"
      "\n";
  EXPECT_EQ(out,
            "HTTP/1.1 502 Bad Gateway\r\n"
            "Server: tollgate\r\n"
            "Content-Type: application/json\r\n"
            "Content-Length: " +
                std::to_string(json.size()) +
                "\r\n"
                "X-Request-Id: 0123456789abcdef0123456789abcdef\r\n"
                "\r\n" +
                json);
  EXPECT_EQ(body, json.size());

  const Rule rule(R"(
[[rules]]
name = "per-ip"
key = "ip"
algorithm = "fixed_window"
limit = 20
window = "1m"
headers = "none"
)");
  Answer limited = gateway::Limited(rule.get(), Limited(1500, 1500));
  limited.request_id = R"(edge"1\x)";
  out.clear();
  const std::size_t limited_body = AppendAnswer(limited, Persistence::kClose, out);
  const std::string limited_json =
      R"({"error":"rate_limited","rule":"per-ip","retry_after_ms":1500,)"
      R"("request_id":"edge\"1\\x"})"
      "\n";
  EXPECT_EQ(out,
            "HTTP/1.1 429 Too Many Requests\r\n"
            "Server: tollgate\r\n"
            "Content-Type: application/json\r\n"
            "Retry-After: 2\r\n"
            "Content-Length: " +
                std::to_string(limited_json.size()) +
                "\r\n"
                "X-Request-Id: edge\"1\\x\r\n"
                "Connection: close\r\n"
                "\r\n" +
                limited_json);
  EXPECT_EQ(limited_body, limited_json.size());
  std::string alone;
  EXPECT_EQ(AppendAnswerBody(limited, alone), limited_json.size());
  EXPECT_EQ(alone, limited_json);
}

TEST(Answer, EveryRefusalHasACodeAStatusAndAMessage) {
  for (int i = 0; i <= static_cast<int>(Refusal::kGatewayTimeout); ++i) {
    const RefusalInfo& info = InfoOf(static_cast<Refusal>(i));
    EXPECT_FALSE(info.code.empty()) << i;
    EXPECT_GE(info.status, 400u) << i;
    EXPECT_FALSE(info.message.empty()) << i;
  }
}

TEST(Answer, NotedForTheAccessLog) {
  Exchange ex;
  NoteAnswer(Refuse(Refusal::kGatewayTimeout), 70, ex);
  EXPECT_EQ(ex.status, 504u);
  EXPECT_EQ(ex.bytes_out, 70u);
  EXPECT_EQ(ex.error, "gateway_timeout");
  EXPECT_EQ(ex.retry_after_ms, -1);

  const Rule rule(R"(
[[rules]]
name = "per-ip"
key = "ip"
algorithm = "fixed_window"
limit = 20
window = "1m"
)");
  Exchange limited;
  NoteAnswer(gateway::Limited(rule.get(), Limited(1500, 1500)), 64, limited);
  EXPECT_EQ(limited.status, 429u);
  EXPECT_EQ(limited.retry_after_ms, 1500);
  EXPECT_EQ(limited.error, "");  // a limited request is no error
}

// The pieces HTTP/2 frames itself: the same body as HTTP/1.1's, its
// Retry-After, and the gRPC status and message.
TEST(Answer, PiecesForHttp2AreHttp11s) {
  const Rule rule(R"(
[[rules]]
name = "50% \"off\""
key = "ip"
algorithm = "fixed_window"
limit = 20
window = "1m"
)");
  for (const Answer& answer : {Refuse(Refusal::kBadGateway), Refuse(Refusal::kStoreUnavailable, 1),
                               gateway::Limited(rule.get(), Limited(52280, 53000))}) {
    std::string whole;
    const std::size_t size = AppendAnswer(answer, Persistence::kKeepAlive, whole);
    std::string body;
    EXPECT_EQ(AppendAnswerBody(answer, body), size);
    EXPECT_EQ(whole.substr(whole.size() - size), body);
  }
  EXPECT_EQ(RetryAfterSeconds(Refuse(Refusal::kBadGateway)), 0);
  EXPECT_EQ(RetryAfterSeconds(Refuse(Refusal::kStoreUnavailable, 1)), 1);
  EXPECT_EQ(RetryAfterSeconds(gateway::Limited(rule.get(), Limited(52280, 53000))), 53);
  EXPECT_EQ(RetryAfterSeconds(gateway::Limited(rule.get(), Limited(0, 53000))), 1);

  std::string message;
  AppendGrpcMessage(gateway::Limited(rule.get(), Limited(52280, 53000)), message);
  // gRPC percent-encodes '%' (and bytes outside printable ASCII).
  EXPECT_EQ(message, R"(rate_limited: rule "50%25 "off"", retry after 52280 ms)");
  message.clear();
  AppendGrpcMessage(RefuseWith(Refusal::kBadRequest, "caf\xc3\xa9"), message);
  EXPECT_EQ(message, "bad_request: caf%C3%A9");
}

TEST(Answer, GrpcStatusOfEachRefusal) {
  EXPECT_EQ(InfoOf(Refusal::kRateLimited).grpc, GrpcStatus::kResourceExhausted);
  EXPECT_EQ(InfoOf(Refusal::kTooManyInflight).grpc, GrpcStatus::kResourceExhausted);
  EXPECT_EQ(InfoOf(Refusal::kUpstreamRateLimited).grpc, GrpcStatus::kResourceExhausted);
  EXPECT_EQ(InfoOf(Refusal::kBadGateway).grpc, GrpcStatus::kUnavailable);
  EXPECT_EQ(InfoOf(Refusal::kStoreUnavailable).grpc, GrpcStatus::kUnavailable);
  EXPECT_EQ(InfoOf(Refusal::kUpstreamBusy).grpc, GrpcStatus::kUnavailable);
  EXPECT_EQ(InfoOf(Refusal::kGatewayTimeout).grpc, GrpcStatus::kDeadlineExceeded);
  EXPECT_EQ(InfoOf(Refusal::kRequestTimeout).grpc, GrpcStatus::kDeadlineExceeded);
  EXPECT_EQ(InfoOf(Refusal::kUnauthorized).grpc, GrpcStatus::kUnauthenticated);
  EXPECT_EQ(InfoOf(Refusal::kBlocked).grpc, GrpcStatus::kPermissionDenied);
  EXPECT_EQ(InfoOf(Refusal::kBlocked).status, 403u);
  EXPECT_EQ(InfoOf(Refusal::kNoRoute).grpc, GrpcStatus::kUnimplemented);
}

}  // namespace
}  // namespace tollgate::gateway
