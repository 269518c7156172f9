#include "gateway/core/upstream_limits.h"

#include <boost/beast/core/string.hpp>
#include <charconv>
#include <cmath>
#include <optional>

#include "gateway/core/identify.h"

namespace tollgate::gateway {
namespace {

// The leading decimal number of `text` (after spaces), if any.
std::optional<double> LeadingNumber(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data() || !std::isfinite(value) || value < 0) {
    return std::nullopt;
  }
  return value;
}

// The number after `name=` in a structured field such as
// `"default";r=10;t=30`.
std::optional<double> Parameter(std::string_view field, std::string_view name) {
  for (std::size_t at = field.find(';'); at != std::string_view::npos;
       at = field.find(';', at + 1)) {
    std::string_view rest = field.substr(at + 1);
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    if (rest.size() > name.size() && rest.substr(0, name.size()) == name &&
        rest[name.size()] == '=') {
      return LeadingNumber(rest.substr(name.size() + 1));
    }
  }
  return std::nullopt;
}

std::int64_t SecondsToMs(double seconds) {
  return static_cast<std::int64_t>(std::ceil(std::min(seconds, 1e9) * 1000));
}

}  // namespace

algorithms::LearnedFacts ReadLearnedFacts(unsigned status, const Fields& fields,
                                          std::int64_t unix_ms) {
  const FieldsLookup lookup(fields);
  const auto field = [&](std::string_view name) { return lookup.Get(name); };
  algorithms::LearnedFacts facts;
  std::optional<double> limit = LeadingNumber(field("X-RateLimit-Limit"));
  if (!limit) limit = Parameter(field("RateLimit-Policy"), "q");
  if (!limit) limit = LeadingNumber(field("RateLimit-Policy"));
  if (!limit) limit = LeadingNumber(field("RateLimit-Limit"));
  if (limit && *limit >= 1) facts.limit = static_cast<std::int64_t>(*limit);

  if (auto after = LeadingNumber(field("X-RateLimit-Reset-After"))) {
    facts.reset_after_ms = SecondsToMs(*after);
  } else if (auto reset = LeadingNumber(field("X-RateLimit-Reset"))) {
    facts.reset_after_ms = *reset > 1e9 ? std::max<std::int64_t>(0, SecondsToMs(*reset) - unix_ms)
                                        : SecondsToMs(*reset);
  } else if (auto t = Parameter(field("RateLimit"), "t")) {
    facts.reset_after_ms = SecondsToMs(*t);
  } else if (auto r = LeadingNumber(field("RateLimit-Reset"))) {
    facts.reset_after_ms = SecondsToMs(*r);
  }

  const std::optional<double> retry_after = LeadingNumber(field("Retry-After"));
  if (status == 429 || (status == 503 && retry_after)) {
    facts.limited = true;
    if (retry_after) facts.retry_after_ms = SecondsToMs(*retry_after);
    facts.global = beast::iequals(field("X-RateLimit-Global"), "true") ||
                   beast::iequals(field("X-RateLimit-Scope"), "global");
  }
  return facts;
}

std::string LearnedBucketOf(const rules::UpstreamConfig& upstream, std::string_view route,
                            std::string_view path) {
  switch (upstream.learn_bucket) {
    case rules::LearnBucket::kUpstream:
      return "";
    case rules::LearnBucket::kRoute:
      return std::string(route);
    case rules::LearnBucket::kPattern:
      break;
  }
  std::string bucket;
  std::string_view rest = path;
  for (const std::string& segment : upstream.learn_pattern) {
    if (rest.empty() || rest.front() != '/') return std::string(route);
    rest.remove_prefix(1);
    const std::string_view actual = rest.substr(0, rest.find('/'));
    const bool any = segment.size() >= 2 && segment.front() == '{' && segment.back() == '}';
    if (!any && actual != segment) return std::string(route);
    if (any && actual.empty()) return std::string(route);
    bucket += '/';
    bucket += actual;
    rest.remove_prefix(actual.size());
  }
  return bucket;
}

}  // namespace tollgate::gateway
