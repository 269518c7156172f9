#include "rules/ip.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cstring>

namespace tollgate::rules {

std::optional<IpAddress> IpAddress::Parse(std::string_view text) {
  if (text.empty() || text.size() > 45) return std::nullopt;
  char buf[46];
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  IpAddress a;
  in_addr v4{};
  if (inet_pton(AF_INET, buf, &v4) == 1) {
    a.bytes[10] = 0xff;
    a.bytes[11] = 0xff;
    std::memcpy(a.bytes.data() + 12, &v4, 4);
    a.v4 = true;
    return a;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, buf, &v6) == 1) {
    std::memcpy(a.bytes.data(), &v6, 16);
    static constexpr std::uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    a.v4 = std::memcmp(a.bytes.data(), kMapped, 12) == 0;
    return a;
  }
  return std::nullopt;
}

std::optional<IpAddress> IpAddress::ParseWithPort(std::string_view text) {
  if (auto plain = Parse(text)) return plain;
  std::string_view address;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    address = text.substr(1, close - 1);
    const std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return std::nullopt;
      port = rest.substr(1);
      if (port.empty()) return std::nullopt;
    }
    // Brackets hold IPv6 only.
    if (address.find(':') == std::string_view::npos) return std::nullopt;
  } else {
    const std::size_t colon = text.find(':');
    // An IPv6 address has several colons and needs brackets around it.
    if (colon == std::string_view::npos || text.find(':', colon + 1) != std::string_view::npos) {
      return std::nullopt;
    }
    address = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (port.empty()) return std::nullopt;
  }
  if (!port.empty()) {
    unsigned number = 0;
    auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), number);
    if (ec != std::errc() || ptr != port.data() + port.size() || port.size() > 5 ||
        number > 65535) {
      return std::nullopt;
    }
  }
  return Parse(address);
}

IpAddress IpAddress::Network(int prefix_length) const {
  IpAddress network = *this;
  const int bits = std::clamp(prefix_length, 0, 128);
  const int full = bits / 8;
  if (full < 16) {
    network.bytes[full] &= static_cast<std::uint8_t>(0xff00u >> (bits % 8));
    std::fill(network.bytes.begin() + full + 1, network.bytes.end(), std::uint8_t{0});
  }
  return network;
}

std::string IpAddress::ToString() const {
  char buf[INET6_ADDRSTRLEN];
  if (v4) {
    inet_ntop(AF_INET, bytes.data() + 12, buf, sizeof(buf));
  } else {
    inet_ntop(AF_INET6, bytes.data(), buf, sizeof(buf));
  }
  return buf;
}

std::optional<Cidr> Cidr::Parse(std::string_view text) {
  std::string problem;
  return Parse(text, problem);
}

std::optional<Cidr> Cidr::Parse(std::string_view text, std::string& problem) {
  const std::size_t slash = text.find('/');
  auto address = IpAddress::Parse(text.substr(0, slash));
  const int family_bits = address && address->v4 ? 32 : 128;
  int bits = family_bits;
  if (address && slash != std::string_view::npos) {
    const std::string_view digits = text.substr(slash + 1);
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), bits);
    if (ec != std::errc() || ptr != digits.data() + digits.size() || bits < 0 ||
        bits > family_bits) {
      address.reset();
    }
  }
  if (!address) {
    problem = "\"" + std::string(text) +
              "\" is not an IP address or network such as \"203.0.113.0/24\" or \"2001:db8::/32\"";
    return std::nullopt;
  }
  Cidr c;
  c.prefix_length = bits + (address->v4 ? 96 : 0);
  c.network = address->Network(c.prefix_length);
  if (c.network != *address) {
    problem = "\"" + std::string(text) + "\" has host bits set: the network of that prefix is \"" +
              c.ToString() + "\"; write that, or the address alone for one host";
    return std::nullopt;
  }
  return c;
}

bool Cidr::Contains(const IpAddress& address) const {
  const int full = prefix_length / 8;
  if (std::memcmp(address.bytes.data(), network.bytes.data(), full) != 0) return false;
  const int rest = prefix_length % 8;
  if (rest == 0) return true;
  const auto mask = static_cast<std::uint8_t>(0xff00u >> rest);
  return (address.bytes[full] & mask) == network.bytes[full];
}

std::string Cidr::ToString() const {
  return network.ToString() + "/" + std::to_string(prefix_length - (network.v4 ? 96 : 0));
}

}  // namespace tollgate::rules
