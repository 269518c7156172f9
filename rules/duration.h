// Parsing of the small value syntaxes used in config files and on the
// command line. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tollgate::rules {

// The longest duration anywhere (config, admin API ttl, command line): 100
// years, so that a deadline now + duration in nanoseconds of any clock fits
// in 64 bits for more than a century to come.
inline constexpr std::int64_t kMaxDurationMs = std::int64_t{36'500} * 86'400'000;
inline constexpr std::string_view kMaxDurationText = "36500d";

enum class DurationProblem {
  kNone,
  kSyntax,           // not a sequence of number + unit
  kTooLong,          // more than kMaxDurationMs
  kBelowResolution,  // not zero, but less than half a millisecond
};

struct Duration {
  std::int64_t ms = 0;
  DurationProblem problem = DurationProblem::kNone;
};

// Go's time.ParseDuration syntax plus the unit d (24h): one or more decimal
// numbers, each with an optional fraction and a unit ns, us, µs, ms, s, m,
// h or d ("500ms", "1m30s", "1.5s", "2h45m"); "0" alone is zero; no sign.
// A bare number other than 0 is not a duration (the unit is required). The
// value is rounded to the nearest millisecond, half up.
Duration ReadDuration(std::string_view text);

// What is wrong with a duration, for messages: "must be a duration such as
// ..." or "must be at most 36500d (100 years)". Empty for kNone.
std::string DescribeDurationProblem(DurationProblem problem);

// A duration that must be at least 1ms (an admin API ttl or window, a
// command-line flag): its milliseconds, or nullopt and in `problem` what is
// wrong, as DescribeDurationProblem says it or "must be at least 1ms".
std::optional<std::int64_t> ReadPositiveDurationMs(std::string_view text, std::string& problem);

// ReadDuration's value, or nullopt for any problem.
std::optional<std::int64_t> ParseDurationMs(std::string_view text);

struct HostPort {
  std::string host;  // without brackets for IPv6
  std::uint16_t port = 0;
  std::string ToString() const;  // "host:port", IPv6 in brackets
};

// An HTTP field name: a token (RFC 9110 §5.6.2), so not empty, no space,
// no ':' (an HTTP/2 pseudo-header such as ":path" is no header to match).
bool IsHeaderName(std::string_view text);
inline constexpr std::string_view kHeaderNameRule =
    "a header name: letters, digits and !#$%&'*+-.^_`|~, no spaces or colons";

// "host:port" or "[v6]:port"; port 0..65535.
std::optional<HostPort> ParseHostPort(std::string_view text);

}  // namespace tollgate::rules
