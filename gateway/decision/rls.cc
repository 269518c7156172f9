#include "gateway/decision/rls.h"

#include <fmt/format.h>
#include <google/protobuf/stubs/logging.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "algorithms/validate.h"
#include "gateway/core/respond.h"

namespace tollgate::gateway {
namespace {

using RateLimit = rls::RateLimitResponse::RateLimit;

constexpr std::size_t kGrpcPrefix = 5;  // compressed flag, 4-byte big-endian length

std::uint32_t ReadBigEndian32(std::string_view bytes) {
  std::uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  return n;
}

struct UnitInfo {
  RateLimit::Unit unit;
  double seconds;
};
constexpr std::array<UnitInfo, 7> kUnits{{
    {RateLimit::SECOND, 1},
    {RateLimit::MINUTE, 60},
    {RateLimit::HOUR, 3600},
    {RateLimit::DAY, 86'400},
    {RateLimit::WEEK, 7 * 86'400},
    {RateLimit::MONTH, 30 * 86'400},
    {RateLimit::YEAR, 365 * 86'400},
}};

// The units of a descriptor's limit, as envoyproxy/ratelimit counts them.
struct DescriptorUnit {
  ::envoy::type::v3::RateLimitUnit unit;
  std::int64_t window_ms;
  std::string_view window;
};
constexpr std::array<DescriptorUnit, 7> kDescriptorUnits{{
    {::envoy::type::v3::SECOND, 1000, "1s"},
    {::envoy::type::v3::MINUTE, 60'000, "1m"},
    {::envoy::type::v3::HOUR, 3'600'000, "1h"},
    {::envoy::type::v3::DAY, 86'400'000, "1d"},
    {::envoy::type::v3::WEEK, 7 * 86'400'000LL, "7d"},
    {::envoy::type::v3::MONTH, 30 * 86'400'000LL, "30d"},
    {::envoy::type::v3::YEAR, 365 * 86'400'000LL, "365d"},
}};

// Header lines "Name: value\r\n" as HeaderValues.
void AddHeaderLines(std::string_view lines, rls::RateLimitResponse& response) {
  while (!lines.empty()) {
    const std::size_t end = lines.find("\r\n");
    const std::string_view line = lines.substr(0, end);
    lines.remove_prefix(end == std::string_view::npos ? lines.size() : end + 2);
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    auto* header = response.add_response_headers_to_add();
    header->set_key(std::string(line.substr(0, colon)));
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    header->set_value(std::string(value));
  }
}

// The policy name of the window a decision reports: the rule's name, and
// ":" and the window as written when the rule has several (as in the
// RateLimit fields).
std::string LimitName(const rules::RuleConfig& rule, std::size_t window) {
  if (rule.windows.size() <= 1) return rule.name;
  return rule.name + ":" + rule.windows[window].text;
}

}  // namespace

std::string ParseRateLimitRequest(std::string_view body, rls::RateLimitRequest& request) {
  // libprotobuf logs every message that fails to parse (a string field
  // that is not UTF-8, for one) on stderr: a client could write the log
  // full. The answer names the problem instead.
  [[maybe_unused]] static const bool kQuiet = (google::protobuf::SetLogHandler(nullptr), true);
  if (body.size() < kGrpcPrefix) return "the request holds no complete gRPC message";
  if (body[0] != 0) return "compressed messages are not accepted (send grpc-encoding identity)";
  const std::uint32_t length = ReadBigEndian32(body.substr(1, 4));
  if (body.size() - kGrpcPrefix != length) {
    return "a unary call's request must be exactly one gRPC message";
  }
  if (!request.ParseFromArray(body.data() + kGrpcPrefix, static_cast<int>(length))) {
    return "the message is not a valid RateLimitRequest";
  }
  if (request.domain().empty()) return "domain: must not be empty";
  if (request.descriptors().empty()) return "descriptors: at least one is required";
  for (int i = 0; i < request.descriptors_size(); ++i) {
    const auto& descriptor = request.descriptors(i);
    if (descriptor.entries().empty()) {
      return fmt::format("descriptors[{}].entries: at least one is required", i);
    }
    for (int j = 0; j < descriptor.entries_size(); ++j) {
      if (descriptor.entries(j).key().empty()) {
        return fmt::format("descriptors[{}].entries[{}].key: must not be empty", i, j);
      }
    }
    if (!descriptor.has_limit()) continue;
    rules::DescriptorLimit limit;
    if (!DescriptorLimitOf(descriptor, limit)) {
      return fmt::format(
          "descriptors[{}].limit.unit: must be SECOND, MINUTE, HOUR, DAY, WEEK, "
          "MONTH or YEAR",
          i);
    }
    algorithms::LimitParams params;
    params.algorithm = algorithms::Algorithm::kFixedWindow;
    params.limit = limit.limit;
    params.window_ms = limit.window_ms;
    if (const auto problem = algorithms::ValidateLimit(params)) {
      return fmt::format("descriptors[{}].limit: {}", i, *problem);
    }
  }
  return {};
}

bool DescriptorLimitOf(
    const ::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor& descriptor,
    rules::DescriptorLimit& out) {
  if (!descriptor.has_limit()) return false;
  for (const DescriptorUnit& u : kDescriptorUnits) {
    if (u.unit == descriptor.limit().unit()) {
      out = {descriptor.limit().requests_per_unit(), u.window_ms, u.window};
      return true;
    }
  }
  return false;
}

std::int64_t DescriptorCost(
    const rls::RateLimitRequest& request,
    const ::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor& descriptor) {
  std::uint64_t cost = request.hits_addend();
  if (descriptor.has_hits_addend()) cost = descriptor.hits_addend().value();
  if (cost == 0) cost = 1;
  return static_cast<std::int64_t>(std::min<std::uint64_t>(cost, kMaxHitsAddend));
}

void SetCurrentLimit(std::int64_t limit, std::int64_t window_ms, RateLimit& out) {
  const double window_s = std::max<double>(0.001, static_cast<double>(window_ms) / 1000.0);
  const UnitInfo* nearest = &kUnits[0];
  for (const UnitInfo& u : kUnits) {
    if (std::abs(std::log(window_s / u.seconds)) < std::abs(std::log(window_s / nearest->seconds))) {
      nearest = &u;
    }
  }
  const double scaled = static_cast<double>(limit) * nearest->seconds / window_s;
  out.set_unit(nearest->unit);
  // A limit of 0 (every request refused) stays 0; another at least 1.
  out.set_requests_per_unit(static_cast<std::uint32_t>(std::clamp<double>(
      std::round(scaled), limit > 0 ? 1 : 0, std::numeric_limits<std::uint32_t>::max())));
}

void BuildRateLimitResponse(const std::vector<DescriptorVerdict>& verdicts,
                            rls::RateLimitResponse& response) {
  // The verdict that speaks for the call, as for a proxied request's
  // fields: the limited one with the longest wait, else the one closest to
  // its limit among the rules that show their fields.
  const DescriptorVerdict* limited = nullptr;
  const DescriptorVerdict* refused = nullptr;  // over by an admin block
  const DescriptorVerdict* closest = nullptr;
  for (const DescriptorVerdict& v : verdicts) {
    auto* status = response.add_statuses();
    status->set_code(v.over_limit ? rls::RateLimitResponse::OVER_LIMIT
                                  : rls::RateLimitResponse::OK);
    if (v.rule == nullptr || v.rule->limit == nullptr) {
      if (v.over_limit && v.refusal.refusal == Refusal::kBlocked && refused == nullptr) {
        refused = &v;
      }
      continue;
    }
    const algorithms::Decision& d = v.decision;
    const std::size_t w = std::min<std::size_t>(d.window, v.rule->limit->windows.size() - 1);
    const algorithms::LimitParams& window = v.rule->limit->windows[w];
    auto* limit = status->mutable_current_limit();
    SetCurrentLimit(window.limit, window.window_ms, *limit);
    limit->set_name(LimitName(*v.rule, w));
    status->set_limit_remaining(static_cast<std::uint32_t>(
        std::clamp<std::int64_t>(d.remaining, 0, std::numeric_limits<std::uint32_t>::max())));
    const std::int64_t reset_ms =
        v.over_limit ? std::max(d.window_reset_ms, d.retry_after_ms) : d.window_reset_ms;
    auto* reset = status->mutable_duration_until_reset();
    reset->set_seconds(reset_ms / 1000);
    reset->set_nanos(static_cast<std::int32_t>(reset_ms % 1000) * 1'000'000);
    if (v.over_limit) {
      if (limited == nullptr || d.retry_after_ms > limited->decision.retry_after_ms) limited = &v;
    } else if (v.rule->headers == rules::RateLimitHeaders::kAll &&
               (closest == nullptr || d.remaining < closest->decision.remaining)) {
      closest = &v;
    }
  }
  const bool over = std::any_of(verdicts.begin(), verdicts.end(),
                                [](const DescriptorVerdict& v) { return v.over_limit; });
  response.set_overall_code(over ? rls::RateLimitResponse::OVER_LIMIT
                                 : rls::RateLimitResponse::OK);
  std::string lines;
  // A block speaks before a rule: no wait for the rule makes it pass.
  if (refused != nullptr || limited != nullptr) {
    const Answer answer =
        refused != nullptr ? refused->refusal : Limited(*limited->rule, limited->decision);
    if (refused == nullptr) AppendRateLimitHeaders(*limited->rule, limited->decision, lines);
    const std::int64_t retry_after_s = RetryAfterSeconds(answer);
    if (retry_after_s > 0) lines += fmt::format("Retry-After: {}\r\n", retry_after_s);
    std::string body;
    AppendAnswerBody(answer, body);
    response.set_raw_body(std::move(body));
  } else if (closest != nullptr && !over) {
    AppendRateLimitHeaders(*closest->rule, closest->decision, lines);
  }
  AddHeaderLines(lines, response);
}

void AppendGrpcFrame(const google::protobuf::MessageLite& message, std::string& out) {
  const std::size_t size = message.ByteSizeLong();
  out.push_back('\0');
  for (int shift = 24; shift >= 0; shift -= 8) {
    out.push_back(static_cast<char>((size >> shift) & 0xff));
  }
  const std::size_t at = out.size();
  out.resize(at + size);
  message.SerializeToArray(out.data() + at, static_cast<int>(size));
}

}  // namespace tollgate::gateway
