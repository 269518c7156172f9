// Parsing of the small value syntaxes used in config files and on the
// command line. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tollgate::rules {

// "500ms", "1s", "2m", "1h", "1d" -> milliseconds. A bare integer is not a
// duration (the unit is required). Overflowing values are rejected.
std::optional<std::int64_t> ParseDurationMs(std::string_view text);

struct HostPort {
  std::string host;  // without brackets for IPv6
  std::uint16_t port = 0;
  std::string ToString() const;  // "host:port", IPv6 in brackets
};

// "host:port" or "[v6]:port"; port 0..65535.
std::optional<HostPort> ParseHostPort(std::string_view text);

}  // namespace tollgate::rules
