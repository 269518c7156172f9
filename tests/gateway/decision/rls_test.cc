// The pure parts of Envoy's RLS in the decision service
// (gateway/decision/rls.h): reading a ShouldRateLimit request from its gRPC
// message (framing, validation naming the field, unknown fields), each
// descriptor's cost, current_limit's unit, and the answer built from the
// verdicts (codes, statuses, the RateLimit and Retry-After fields, the
// 429 body).
#include "gateway/decision/rls.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rules/config.h"
#include "tests/gateway/test_support.h"

namespace tollgate::gateway {
namespace {

using RateLimit = rls::RateLimitResponse::RateLimit;

std::string Frame(const rls::RateLimitRequest& request) {
  std::string out;
  AppendGrpcFrame(request, out);
  return out;
}

// A gRPC message of `payload` as it is, however malformed.
std::string RawFrame(const std::string& payload) {
  std::string out(1, '\0');
  for (int shift = 24; shift >= 0; shift -= 8) {
    out.push_back(static_cast<char>((payload.size() >> shift) & 0xff));
  }
  return out + payload;
}

rls::RateLimitRequest Request(const std::string& domain,
                              const std::vector<std::vector<std::pair<std::string, std::string>>>&
                                  descriptors) {
  rls::RateLimitRequest request;
  request.set_domain(domain);
  for (const auto& entries : descriptors) {
    auto* d = request.add_descriptors();
    for (const auto& [key, value] : entries) {
      auto* e = d->add_entries();
      e->set_key(key);
      e->set_value(value);
    }
  }
  return request;
}

std::string Parse(const std::string& body) {
  rls::RateLimitRequest request;
  return ParseRateLimitRequest(body, request);
}

TEST(ParseRateLimitRequest, AGoodRequest) {
  rls::RateLimitRequest request;
  const std::string body = Frame(Request("edge", {{{"remote_address", "10.0.0.1"}}, {{"a", ""}}}));
  EXPECT_EQ(ParseRateLimitRequest(body, request), "");
  EXPECT_EQ(request.domain(), "edge");
  ASSERT_EQ(request.descriptors_size(), 2);
  EXPECT_EQ(request.descriptors(0).entries(0).value(), "10.0.0.1");
}

TEST(ParseRateLimitRequest, FramingProblems) {
  const std::string good = Frame(Request("edge", {{{"k", "v"}}}));
  EXPECT_EQ(Parse(""), "the request holds no complete gRPC message");
  EXPECT_EQ(Parse(good.substr(0, 4)), "the request holds no complete gRPC message");
  std::string compressed = good;
  compressed[0] = 1;
  EXPECT_EQ(Parse(compressed),
            "compressed messages are not accepted (send grpc-encoding identity)");
  EXPECT_EQ(Parse(good.substr(0, good.size() - 1)),
            "a unary call's request must be exactly one gRPC message");
  EXPECT_EQ(Parse(good + good), "a unary call's request must be exactly one gRPC message");
  // Field 1 (domain, length-delimited) announcing more bytes than follow.
  EXPECT_EQ(Parse(RawFrame("\x0a\x10" "ab")), "the message is not a valid RateLimitRequest");
}

TEST(ParseRateLimitRequest, ValidationNamesTheField) {
  EXPECT_EQ(Parse(Frame(Request("", {{{"k", "v"}}}))), "domain: must not be empty");
  EXPECT_EQ(Parse(Frame(Request("edge", {}))), "descriptors: at least one is required");
  EXPECT_EQ(Parse(Frame(Request("edge", {{{"k", "v"}}, {}}))),
            "descriptors[1].entries: at least one is required");
  EXPECT_EQ(Parse(Frame(Request("edge", {{{"k", "v"}}, {{"a", "1"}, {"", "2"}}}))),
            "descriptors[1].entries[1].key: must not be empty");
  // An empty message: every field at its default.
  EXPECT_EQ(Parse(RawFrame("")), "domain: must not be empty");
}

// Fields this copy of the .proto does not know (a newer Envoy's) are
// skipped, at the top and inside a descriptor, whatever their wire type.
TEST(ParseRateLimitRequest, UnknownFieldsAreSkipped) {
  rls::RateLimitRequest request = Request("edge", {{{"k", "v"}}});
  std::string payload = request.SerializeAsString();
  payload += std::string("\xf8\x06\x2a", 3);                  // field 111, varint 42
  payload += std::string("\x9a\x07\x03xyz", 6);               // field 115, 3 bytes
  payload += std::string("\x25\x01\x02\x03\x04", 5);          // field 4, fixed32
  rls::RateLimitRequest parsed;
  EXPECT_EQ(ParseRateLimitRequest(RawFrame(payload), parsed), "");
  EXPECT_EQ(parsed.domain(), "edge");
  // Inside a descriptor: field 2 of RateLimitRequest is the descriptor;
  // its own unknown field 9 (varint) after the entry.
  std::string descriptor = request.descriptors(0).SerializeAsString() + "\x48\x07";
  std::string nested = "\x0a\x04" "edge";
  nested += '\x12';
  nested += static_cast<char>(descriptor.size());
  nested += descriptor;
  EXPECT_EQ(ParseRateLimitRequest(RawFrame(nested), parsed), "");
  EXPECT_EQ(parsed.descriptors(0).entries(0).key(), "k");
}

// A descriptor's own limit (Envoy's RateLimitOverride) is read with the
// window its unit stands for; one that cannot be decided is refused.
TEST(ParseRateLimitRequest, DescriptorLimits) {
  rls::RateLimitRequest request = Request("edge", {{{"k", "v"}}, {{"k", "w"}}});
  auto* limit = request.mutable_descriptors(0)->mutable_limit();
  limit->set_requests_per_unit(5);
  limit->set_unit(::envoy::type::v3::MONTH);
  rls::RateLimitRequest parsed;
  ASSERT_EQ(ParseRateLimitRequest(Frame(request), parsed), "");
  rules::DescriptorLimit read;
  ASSERT_TRUE(DescriptorLimitOf(parsed.descriptors(0), read));
  EXPECT_EQ(read.limit, 5);
  EXPECT_EQ(read.window_ms, 30 * 86'400'000LL);
  EXPECT_EQ(read.window, "30d");
  EXPECT_FALSE(DescriptorLimitOf(parsed.descriptors(1), read));
  limit->set_unit(::envoy::type::v3::UNKNOWN);
  EXPECT_EQ(Parse(Frame(request)),
            "descriptors[0].limit.unit: must be SECOND, MINUTE, HOUR, DAY, WEEK, MONTH or YEAR");
  // 0 refuses every call, as in envoyproxy/ratelimit.
  limit->set_unit(::envoy::type::v3::SECOND);
  limit->set_requests_per_unit(0);
  EXPECT_EQ(Parse(Frame(request)), "");
  limit->set_unit(::envoy::type::v3::YEAR);
  limit->set_requests_per_unit(4'000'000'000U);
  EXPECT_NE(Parse(Frame(request)).find("descriptors[0].limit: limit 4000000000 with burst 0"),
            std::string::npos);
}

TEST(DescriptorCost, DescriptorThenRequestThenOne) {
  rls::RateLimitRequest request = Request("edge", {{{"k", "v"}}, {{"k", "w"}}});
  EXPECT_EQ(DescriptorCost(request, request.descriptors(0)), 1);
  request.set_hits_addend(5);
  EXPECT_EQ(DescriptorCost(request, request.descriptors(0)), 5);
  request.mutable_descriptors(1)->mutable_hits_addend()->set_value(7);
  EXPECT_EQ(DescriptorCost(request, request.descriptors(0)), 5);
  EXPECT_EQ(DescriptorCost(request, request.descriptors(1)), 7);
  request.mutable_descriptors(1)->mutable_hits_addend()->set_value(std::uint64_t{1} << 50);
  EXPECT_EQ(DescriptorCost(request, request.descriptors(1)), kMaxHitsAddend);
}

std::string Limit(std::int64_t limit, std::int64_t window_ms) {
  RateLimit out;
  SetCurrentLimit(limit, window_ms, out);
  return std::to_string(out.requests_per_unit()) + "/" + RateLimit::Unit_Name(out.unit());
}

TEST(SetCurrentLimit, TheNearestUnitAndTheLimitScaledToIt) {
  EXPECT_EQ(Limit(10, 1000), "10/SECOND");
  EXPECT_EQ(Limit(20, 60'000), "20/MINUTE");
  EXPECT_EQ(Limit(1000, 3'600'000), "1000/HOUR");
  EXPECT_EQ(Limit(5, 86'400'000), "5/DAY");
  EXPECT_EQ(Limit(7, 7 * 86'400'000LL), "7/WEEK");
  EXPECT_EQ(Limit(30, 30 * 86'400'000LL), "30/MONTH");
  EXPECT_EQ(Limit(2, 365 * 86'400'000LL), "2/YEAR");
  // Between units, the nearer on a logarithmic scale: 10 s is nearer a
  // minute (6x) than a second (10x).
  EXPECT_EQ(Limit(100, 10'000), "600/MINUTE");
  EXPECT_EQ(Limit(5, 500), "10/SECOND");
  EXPECT_EQ(Limit(90, 5'000), "18/SECOND");
  // At least 1.
  EXPECT_EQ(Limit(1, 3 * 3'600'000), "1/HOUR");
}

// The first rule of a basic configuration with `rules`.
class Rules {
 public:
  explicit Rules(const std::string& rules) {
    loaded_ = rules::LoadConfigText(testing::WithEchoPort(testing::BasicConfig(rules), 9), "t.toml");
    if (!loaded_.config) ADD_FAILURE() << loaded_.errors[0].ToString();
  }
  const rules::RuleConfig& operator[](std::size_t i) const { return loaded_.config->rules[i]; }

 private:
  rules::LoadResult loaded_;
};

constexpr const char* kRules = R"(
[[rules]]
name = "login"
match = { domain = "edge", descriptor = { path = "/login" } }
key = "descriptor"
algorithm = "fixed_window"
limit = 20
window = "1m"
[[rules]]
name = "tenant"
match = { domain = "edge" }
key = "descriptor"
algorithm = "sliding_log"
limits = [{ limit = 5, window = "1s" }, { limit = 100, window = "1h" }]
)";

DescriptorVerdict Verdict(const rules::RuleConfig* rule, bool over, std::int64_t remaining,
                          std::int64_t window_reset_ms, std::int64_t retry_after_ms = 0,
                          std::uint8_t window = 0) {
  DescriptorVerdict v;
  v.over_limit = over;
  v.rule = rule;
  v.decision.allowed = !over;
  v.decision.remaining = remaining;
  v.decision.window_reset_ms = window_reset_ms;
  v.decision.retry_after_ms = retry_after_ms;
  v.decision.window = window;
  return v;
}

std::string Headers(const rls::RateLimitResponse& response) {
  std::string out;
  for (const auto& h : response.response_headers_to_add()) out += h.key() + ": " + h.value() + "\n";
  return out;
}

TEST(BuildRateLimitResponse, AllowedDescriptors) {
  const Rules rules(kRules);
  rls::RateLimitResponse response;
  BuildRateLimitResponse({Verdict(&rules[0], false, 19, 52'280),
                          Verdict(&rules[1], false, 3, 400, 0, 0), Verdict(nullptr, false, 0, 0)},
                         response);
  EXPECT_EQ(response.overall_code(), rls::RateLimitResponse::OK);
  ASSERT_EQ(response.statuses_size(), 3);
  const auto& login = response.statuses(0);
  EXPECT_EQ(login.code(), rls::RateLimitResponse::OK);
  EXPECT_EQ(login.current_limit().name(), "login");
  EXPECT_EQ(login.current_limit().requests_per_unit(), 20u);
  EXPECT_EQ(login.current_limit().unit(), RateLimit::MINUTE);
  EXPECT_EQ(login.limit_remaining(), 19u);
  EXPECT_EQ(login.duration_until_reset().seconds(), 52);
  EXPECT_EQ(login.duration_until_reset().nanos(), 280'000'000);
  // A rule of several windows reports the window of its decision.
  const auto& tenant = response.statuses(1);
  EXPECT_EQ(tenant.current_limit().name(), "tenant:1s");
  EXPECT_EQ(tenant.current_limit().requests_per_unit(), 5u);
  EXPECT_EQ(tenant.current_limit().unit(), RateLimit::SECOND);
  EXPECT_EQ(tenant.limit_remaining(), 3u);
  // No rule applied: OK and nothing else.
  const auto& none = response.statuses(2);
  EXPECT_EQ(none.code(), rls::RateLimitResponse::OK);
  EXPECT_FALSE(none.has_current_limit());
  EXPECT_FALSE(none.has_duration_until_reset());
  // The fields of the rule closest to its limit, as for a proxied request.
  EXPECT_EQ(Headers(response),
            "RateLimit-Policy: \"tenant:1s\";q=5;w=1, \"tenant:1h\";q=100;w=3600\n"
            "RateLimit: \"tenant:1s\";r=3;t=1\n"
            "X-RateLimit-Limit: 5\n"
            "X-RateLimit-Remaining: 3\n"
            "X-RateLimit-Reset: 1\n");
  EXPECT_TRUE(response.raw_body().empty());
}

TEST(BuildRateLimitResponse, OneOverLimitMakesTheWholeAnswerOverLimit) {
  const Rules rules(kRules);
  rls::RateLimitResponse response;
  BuildRateLimitResponse({Verdict(&rules[1], false, 4, 900),
                          Verdict(&rules[0], true, 0, 30'000, 30'000)},
                         response);
  EXPECT_EQ(response.overall_code(), rls::RateLimitResponse::OVER_LIMIT);
  ASSERT_EQ(response.statuses_size(), 2);
  EXPECT_EQ(response.statuses(0).code(), rls::RateLimitResponse::OK);
  EXPECT_EQ(response.statuses(0).limit_remaining(), 4u);
  EXPECT_EQ(response.statuses(1).code(), rls::RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(response.statuses(1).limit_remaining(), 0u);
  EXPECT_EQ(response.statuses(1).duration_until_reset().seconds(), 30);
  EXPECT_EQ(Headers(response),
            "RateLimit-Policy: \"login\";q=20;w=60\n"
            "RateLimit: \"login\";r=0;t=30\n"
            "X-RateLimit-Limit: 20\n"
            "X-RateLimit-Remaining: 0\n"
            "X-RateLimit-Reset: 30\n"
            "Retry-After: 30\n");
  EXPECT_EQ(response.raw_body(),
            "{\"error\":\"rate_limited\",\"rule\":\"login\",\"retry_after_ms\":30000}\n");
}

// A client the admin API blocks is over the limit by no rule: the answer
// carries the block's Retry-After and body, as a proxied request's 403.
TEST(BuildRateLimitResponse, ABlockedClientGetsTheBlocksRetryAfterAndBody) {
  const Rules rules(kRules);
  rls::RateLimitResponse response;
  DescriptorVerdict blocked = Verdict(nullptr, true, 0, 0);
  blocked.refusal = RefuseWithStatus(Refusal::kBlocked, 403, 600);
  BuildRateLimitResponse({Verdict(&rules[0], true, 0, 30'000, 30'000), blocked}, response);
  EXPECT_EQ(response.overall_code(), rls::RateLimitResponse::OVER_LIMIT);
  ASSERT_EQ(response.statuses_size(), 2);
  EXPECT_EQ(response.statuses(1).code(), rls::RateLimitResponse::OVER_LIMIT);
  EXPECT_FALSE(response.statuses(1).has_current_limit());
  // The block speaks for the call: waiting for the rule would not pass it.
  EXPECT_EQ(Headers(response), "Retry-After: 600\n");
  EXPECT_EQ(response.raw_body(),
            "{\"error\":\"blocked\",\"message\":\"requests of this client are blocked\","
            "\"status\":403}\n");
}

// Another refusal by no rule (max_inflight) does not speak before a rule
// that limited: its wait and fields are the answer's, as before blocks.
TEST(BuildRateLimitResponse, OnlyABlockSpeaksBeforeALimitingRule) {
  const Rules rules(kRules);
  rls::RateLimitResponse response;
  DescriptorVerdict busy = Verdict(nullptr, true, 0, 0);
  busy.refusal = Refuse(Refusal::kTooManyInflight, 1);
  BuildRateLimitResponse({busy, Verdict(&rules[0], true, 0, 30'000, 30'000)}, response);
  EXPECT_EQ(response.overall_code(), rls::RateLimitResponse::OVER_LIMIT);
  EXPECT_TRUE(Headers(response).ends_with("Retry-After: 30\n")) << Headers(response);
  EXPECT_EQ(response.raw_body(),
            "{\"error\":\"rate_limited\",\"rule\":\"login\",\"retry_after_ms\":30000}\n");
}

// When over the limit, a descriptor resets when it may pass again: a
// sliding log's retry comes later than its window's reset.
TEST(BuildRateLimitResponse, OverLimitResetsWhenTheRetryMayPass) {
  const Rules rules(kRules);
  rls::RateLimitResponse response;
  BuildRateLimitResponse({Verdict(&rules[1], true, 0, 200, 1'700, 1)}, response);
  const auto& status = response.statuses(0);
  EXPECT_EQ(status.current_limit().name(), "tenant:1h");
  EXPECT_EQ(status.current_limit().requests_per_unit(), 100u);
  EXPECT_EQ(status.current_limit().unit(), RateLimit::HOUR);
  EXPECT_EQ(status.duration_until_reset().seconds(), 1);
  EXPECT_EQ(status.duration_until_reset().nanos(), 700'000'000);
}

TEST(AppendGrpcFrame, PrefixAndMessage) {
  rls::RateLimitResponse response;
  response.set_overall_code(rls::RateLimitResponse::OK);
  std::string out = "x";
  AppendGrpcFrame(response, out);
  EXPECT_EQ(out, std::string("x\0\0\0\0\x02\x08\x01", 8));
}

}  // namespace
}  // namespace tollgate::gateway
