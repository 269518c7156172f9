// IP addresses and CIDR blocks without a networking library: IPv4 is held
// as an IPv4-mapped IPv6 address, so one comparison serves both families.
// Values; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tollgate::rules {

struct IpAddress {
  std::array<std::uint8_t, 16> bytes{};
  bool v4 = false;

  // "192.0.2.1", "2001:db8::1" (no brackets, no port).
  static std::optional<IpAddress> Parse(std::string_view text);
  // An X-Forwarded-For entry: an address as Parse reads it, or with a port
  // ("192.0.2.1:5678", "[2001:db8::1]:443"; also "[2001:db8::1]"), which
  // some proxies write (nginx's realip accepts the same).
  static std::optional<IpAddress> ParseWithPort(std::string_view text);
  std::string ToString() const;
  // The first `prefix_length` bits of the 128-bit form, the others zero.
  IpAddress Network(int prefix_length) const;
  friend bool operator==(const IpAddress&, const IpAddress&) = default;
};

struct Cidr {
  IpAddress network;
  int prefix_length = 0;  // over the 128-bit form

  // "10.0.0.0/8", "::1/128", or a bare address (a single host). A network
  // with host bits set ("127.0.0.6/0") is refused, not masked: it is most
  // likely a typo for one address, and masked it would mean far more.
  static std::optional<Cidr> Parse(std::string_view text);
  // As Parse; when refused, `problem` says why, naming `text` and (for host
  // bits) the network it would have meant.
  static std::optional<Cidr> Parse(std::string_view text, std::string& problem);
  bool Contains(const IpAddress& address) const;
  std::string ToString() const;  // "10.0.0.0/8", "2001:db8::/32"
};

}  // namespace tollgate::rules
