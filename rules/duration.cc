#include "rules/duration.h"

#include <charconv>

namespace tollgate::rules {

namespace {

constexpr std::int64_t kNsPerMs = 1'000'000;

// Nanoseconds per unit; 0 for an unknown unit.
std::int64_t UnitNs(std::string_view unit) {
  struct Unit {
    std::string_view name;
    std::int64_t ns;
  };
  static constexpr Unit kUnits[] = {
      {"ns", 1},
      {"us", 1'000},
      {"\u00b5s", 1'000},  // micro sign, as Go accepts
      {"\u03bcs", 1'000},  // Greek small letter mu, as Go accepts
      {"ms", kNsPerMs},
      {"s", 1'000 * kNsPerMs},
      {"m", 60'000 * kNsPerMs},
      {"h", 3'600'000 * kNsPerMs},
      {"d", 86'400'000 * kNsPerMs},
  };
  for (const Unit& u : kUnits) {
    if (u.name == unit) return u.ns;
  }
  return 0;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

Duration ReadDuration(std::string_view text) {
  using Wide = unsigned __int128;
  if (text == "0") return {};
  if (text.empty()) return {0, DurationProblem::kSyntax};
  // Anything above `cap` is too long; sums stop growing there, so that no
  // number of digits overflows.
  const Wide cap = static_cast<Wide>(kMaxDurationMs + 1) * kNsPerMs;
  Wide total_ns = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    Wide whole = 0;
    bool digits = false;
    for (; i < text.size() && IsDigit(text[i]); ++i, digits = true) {
      if (whole <= cap) whole = whole * 10 + static_cast<unsigned>(text[i] - '0');
    }
    // Fraction digits past the 18th are below a nanosecond of a day.
    std::uint64_t fraction = 0;
    std::uint64_t scale = 1;
    if (i < text.size() && text[i] == '.') {
      for (++i; i < text.size() && IsDigit(text[i]); ++i, digits = true) {
        if (scale < 1'000'000'000'000'000'000u) {
          fraction = fraction * 10 + static_cast<unsigned>(text[i] - '0');
          scale *= 10;
        }
      }
    }
    const std::size_t unit_begin = i;
    while (i < text.size() && !IsDigit(text[i]) && text[i] != '.') ++i;
    const std::int64_t unit_ns = UnitNs(text.substr(unit_begin, i - unit_begin));
    if (!digits || unit_ns == 0) return {0, DurationProblem::kSyntax};
    const Wide ns = static_cast<Wide>(unit_ns);
    total_ns += whole > cap ? cap : whole * ns + static_cast<Wide>(fraction) * ns / scale;
    if (total_ns > cap) total_ns = cap;
  }
  const Wide ms = (total_ns + kNsPerMs / 2) / kNsPerMs;
  if (ms > static_cast<Wide>(kMaxDurationMs)) return {0, DurationProblem::kTooLong};
  if (ms == 0 && total_ns != 0) return {0, DurationProblem::kBelowResolution};
  return {static_cast<std::int64_t>(ms), DurationProblem::kNone};
}

std::string DescribeDurationProblem(DurationProblem problem) {
  switch (problem) {
    case DurationProblem::kNone:
      return {};
    case DurationProblem::kSyntax:
      return "must be a duration such as \"500ms\", \"1.5s\", \"1m30s\", \"1h\" or \"1d\"";
    case DurationProblem::kTooLong:
      return std::string("must be at most \"") + std::string(kMaxDurationText) + "\" (100 years)";
    case DurationProblem::kBelowResolution:
      return "must be 0 or at least 1ms (durations are rounded to the millisecond)";
  }
  return {};
}

std::optional<std::int64_t> ReadPositiveDurationMs(std::string_view text, std::string& problem) {
  const Duration d = ReadDuration(text);
  if (d.problem == DurationProblem::kNone && d.ms >= 1) return d.ms;
  problem = d.problem == DurationProblem::kNone || d.problem == DurationProblem::kBelowResolution
                ? "must be at least 1ms"
                : DescribeDurationProblem(d.problem);
  return std::nullopt;
}

std::optional<std::int64_t> ParseDurationMs(std::string_view text) {
  const Duration d = ReadDuration(text);
  if (d.problem != DurationProblem::kNone) return std::nullopt;
  return d.ms;
}

bool IsHeaderName(std::string_view text) {
  constexpr std::string_view kSymbols = "!#$%&'*+-.^_`|~";
  for (const char c : text) {
    const bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!alnum && kSymbols.find(c) == std::string_view::npos) return false;
  }
  return !text.empty();
}

std::string HostPort::ToString() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::optional<HostPort> ParseHostPort(std::string_view text) {
  HostPort hp;
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return std::nullopt;
    }
    hp.host = std::string(text.substr(1, close - 1));
    port_text = text.substr(close + 2);
  } else {
    const std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos || text.find(':') != colon) return std::nullopt;
    hp.host = std::string(text.substr(0, colon));
    port_text = text.substr(colon + 1);
  }
  if (hp.host.empty() || port_text.empty()) return std::nullopt;
  unsigned port = 0;
  auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || ptr != port_text.data() + port_text.size() || port > 65535) {
    return std::nullopt;
  }
  hp.port = static_cast<std::uint16_t>(port);
  return hp;
}

}  // namespace tollgate::rules
