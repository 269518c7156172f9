#include "rules/rule_set.h"

#include <openssl/sha.h>

#include <algorithm>
#include <functional>
#include <string_view>

#include "rules/route_table.h"

namespace tollgate::rules {
namespace {

constexpr char kHex[] = "0123456789abcdef";

// '#' and the first `bytes` bytes of the value's SHA-256 in hex.
void AppendFingerprint(std::string_view value, int bytes, std::string& out) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(value.data()), value.size(), digest);
  out.push_back('#');
  for (int i = 0; i < bytes; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 15]);
  }
}

void AppendBounded(std::string_view value, std::string& out) {
  out.push_back('\x1f');
  if (value.size() <= kMaxKeyPart) {
    out.append(value);
    return;
  }
  AppendFingerprint(value, 16, out);
}

// The `ip` part: an IPv4 address as its 16 bytes (IPv4-mapped); an IPv6
// client's network as its 16 bytes and a 17th, the prefix length; an
// unidentified client (no address) as '#' and 32 hex digits of its text's
// SHA-256. None can be another: no IPv6 network is IPv4-mapped (its bytes
// 10-11 would be ff, so the prefix would keep bytes 0-9, all zero), an IPv4
// part starts with a zero byte where a fingerprint has '#', and an IPv6
// part is followed by the separator (or the key's end) where a
// fingerprint's digits go on.
void AppendIp(const Identity& identity, std::string& out) {
  out.push_back('\x1f');
  if (!identity.unidentified_client.empty()) {
    AppendFingerprint(identity.unidentified_client, 16, out);
    return;
  }
  const IpAddress& ip = identity.client_ip;
  if (ip.v4) {
    out.append(reinterpret_cast<const char*>(ip.bytes.data()), ip.bytes.size());
    return;
  }
  const IpAddress network = ip.Network(identity.ipv6_prefix);
  out.append(reinterpret_cast<const char*>(network.bytes.data()), network.bytes.size());
  out.push_back(static_cast<char>(identity.ipv6_prefix));
}

// The size of the `ip` part at the start of `rest` (see AppendIp).
std::size_t IpPartSize(std::string_view rest) {
  constexpr std::size_t kFingerprint = 33;
  if (rest.size() >= kFingerprint && rest.front() == '#' &&
      (rest.size() == kFingerprint || rest[kFingerprint] == '\x1f') &&
      std::all_of(rest.begin() + 1, rest.begin() + kFingerprint,
                  [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); })) {
    return kFingerprint;
  }
  static constexpr std::uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  const bool v4 =
      rest.size() >= 16 && std::equal(std::begin(kMapped), std::end(kMapped),
                                      reinterpret_cast<const std::uint8_t*>(rest.data()));
  return std::min<std::size_t>(v4 ? 16 : 17, rest.size());
}

// A part's kind as configured: "ip", "user", ... ("header:" before the
// header's name).
std::string_view PartName(const KeyPart& part) {
  switch (part.kind) {
    case KeyPartKind::kIp:
      return "ip";
    case KeyPartKind::kUser:
      return "user";
    case KeyPartKind::kRole:
      return "role";
    case KeyPartKind::kGlobal:
      return "global";
    case KeyPartKind::kRoute:
      return "route";
    case KeyPartKind::kHeader:
      return "header:";
    case KeyPartKind::kDescriptor:
      return "descriptor";
    case KeyPartKind::kJson:
      return "json:";
  }
  return "";
}

// Entries of an RLS descriptor within the `descriptor` part.
constexpr char kEntrySeparator = '\x1e';

// Calls `fn` with each entry of `descriptor`: in the order of the rule's
// `descriptor` match (sorted by key) when it has one, so that the order the
// entries came in does not matter, else as they came.
template <typename Fn>
void ForEachEntry(const RuleMatch& match, std::span<const DescriptorEntry> descriptor, Fn fn) {
  if (match.descriptor.empty()) {
    for (const DescriptorEntry& entry : descriptor) fn(entry);
    return;
  }
  for (const auto& [name, value] : match.descriptor) {
    for (const DescriptorEntry& entry : descriptor) {
      if (entry.key == name) fn(entry);
    }
  }
}

// The `descriptor` part: "key=value" per entry, separated by
// kEntrySeparator, bounded like any part. Entries are bytes a client
// chooses: when a key holds '=' or either holds a separator, the readable
// form could be another descriptor's, so the part is then the fingerprint
// of a length-prefixed form (which starts with a byte no readable form
// holds, and has no '=' where every readable form has one).
void AppendDescriptor(const RuleMatch& match, std::span<const DescriptorEntry> descriptor,
                      std::string& key) {
  std::string readable;
  bool ambiguous = false;
  ForEachEntry(match, descriptor, [&](const DescriptorEntry& entry) {
    if (!readable.empty()) readable.push_back(kEntrySeparator);
    readable.append(entry.key);
    readable.push_back('=');
    readable.append(entry.value);
    ambiguous = ambiguous || entry.key.find_first_of("=\x1e\x1f") != std::string_view::npos ||
                entry.value.find_first_of("\x1e\x1f") != std::string_view::npos;
  });
  if (!ambiguous) {
    AppendBounded(readable, key);
    return;
  }
  std::string exact(1, '\x1f');
  ForEachEntry(match, descriptor, [&](const DescriptorEntry& entry) {
    for (const std::string_view text : {entry.key, entry.value}) {
      exact += std::to_string(text.size());
      exact.push_back(':');
      exact.append(text);
    }
  });
  key.push_back('\x1f');
  AppendFingerprint(exact, 16, key);
}

bool MatchesDescriptor(const RuleMatch& match, const RequestFacts& request) {
  if (!match.domain.empty() && match.domain != request.domain) return false;
  if (match.descriptor.empty()) return true;
  if (match.descriptor.size() != request.descriptor.size()) return false;
  const auto entry = [&](std::string_view name) {
    return std::find_if(request.descriptor.begin(), request.descriptor.end(),
                        [&](const DescriptorEntry& e) { return e.key == name; });
  };
  for (const auto& [name, value] : match.descriptor) {
    const auto it = entry(name);
    if (it == request.descriptor.end() || (value != "*" && it->value != value)) return false;
  }
  // Every key of descriptor_except is one of `descriptor`'s, found above.
  for (const auto& [name, values] : match.descriptor_except) {
    if (std::find(values.begin(), values.end(), entry(name)->value) != values.end()) return false;
  }
  return true;
}

}  // namespace

bool Matches(const RuleMatch& match, const RequestFacts& request, const Identity& identity) {
  if (match.ForDescriptors() && !MatchesDescriptor(match, request)) return false;
  if (!match.path_prefix.empty() &&
      request.path.substr(0, match.path_prefix.size()) != match.path_prefix) {
    return false;
  }
  if (!match.methods.empty() && std::find(match.methods.begin(), match.methods.end(),
                                          request.method) == match.methods.end()) {
    return false;
  }
  if (match.anonymous && *match.anonymous != identity.anonymous()) return false;
  if (!match.roles.empty() &&
      std::find(match.roles.begin(), match.roles.end(), identity.role) == match.roles.end()) {
    return false;
  }
  if (!match.ips.empty() && (!identity.unidentified_client.empty() ||
                             std::none_of(match.ips.begin(), match.ips.end(), [&](const Cidr& c) {
                               return c.Contains(identity.client_ip);
                             }))) {
    return false;
  }
  if (!match.host.empty() && !SameHostName(request.host, match.host)) return false;
  for (const auto& [name, value] : match.headers) {
    if (request.headers->Get(name) != value) return false;
  }
  return match.exclude == nullptr || !Matches(*match.exclude, request, identity);
}

namespace {

bool AppendJsonPart(const KeyPart& part, const HeaderLookup& body_fields, std::string& key) {
  const std::string_view value = body_fields.Get(part.header);
  if (value.empty()) return false;
  AppendBounded(value, key);
  return true;
}

}  // namespace

namespace {

// `parts`' values appended to `key`; false when the request lacks one.
bool AppendParts(const RuleConfig& rule, const std::vector<KeyPart>& parts,
                 const RequestFacts& request, const Identity& identity, std::string& key) {
  for (const KeyPart& part : parts) {
    switch (part.kind) {
      case KeyPartKind::kIp:
        AppendIp(identity, key);
        break;
      case KeyPartKind::kUser:
        if (identity.user.empty()) return false;
        AppendBounded(identity.user, key);
        break;
      case KeyPartKind::kRole:
        if (identity.role.empty()) return false;
        AppendBounded(identity.role, key);
        break;
      case KeyPartKind::kGlobal:
        AppendBounded("*", key);
        break;
      case KeyPartKind::kRoute:
        AppendBounded(request.route, key);
        break;
      case KeyPartKind::kHeader: {
        const std::string_view value = request.headers->Get(part.header);
        if (value.empty()) return false;
        AppendBounded(value, key);
        break;
      }
      case KeyPartKind::kDescriptor:
        if (request.descriptor.empty()) return false;
        AppendDescriptor(rule.match, request.descriptor, key);
        break;
      case KeyPartKind::kJson:
        // The last parts: AppendBodyKey's when the body is yet to be read.
        if (request.body_fields == nullptr) return true;
        if (!AppendJsonPart(part, *request.body_fields, key)) return false;
        break;
    }
  }
  return true;
}

}  // namespace

bool BuildKey(const RuleConfig& rule, const RequestFacts& request, const Identity& identity,
              std::string& key) {
  key.assign(rule.name);
  return AppendParts(rule, rule.key, request, identity, key);
}

bool AppendBodyKey(const RuleConfig& rule, const HeaderLookup& body_fields, std::string& key) {
  for (const KeyPart& part : rule.key) {
    if (part.kind == KeyPartKind::kJson && !AppendJsonPart(part, body_fields, key)) return false;
  }
  return true;
}

std::vector<ShownPart> ShownKeyParts(const RuleConfig& rule, std::string_view key) {
  std::vector<ShownPart> parts;
  if (key.substr(0, rule.name.size()) != rule.name) return parts;
  std::string_view rest = key.substr(rule.name.size());
  for (const KeyPart& part : rule.key) {
    if (rest.empty() || rest.front() != '\x1f') break;
    rest.remove_prefix(1);
    // An address is raw bytes (which may contain the separator).
    const std::size_t size =
        part.kind == KeyPartKind::kIp ? IpPartSize(rest) : rest.substr(0, rest.find('\x1f')).size();
    const std::string_view value = rest.substr(0, size);
    rest.remove_prefix(size);
    ShownPart& shown = parts.emplace_back();
    shown.name = PartName(part);
    if (part.kind == KeyPartKind::kHeader || part.kind == KeyPartKind::kJson) {
      shown.name += part.header;
    }
    if (part.kind == KeyPartKind::kIp && (value.size() == 16 || value.size() == 17)) {
      IpAddress ip;
      std::copy_n(value.begin(), 16, ip.bytes.begin());
      ip.v4 = value.size() == 16;
      shown.value = ip.ToString();
      const int prefix = value.size() == 17 ? static_cast<std::uint8_t>(value[16]) : 128;
      if (prefix < 128) shown.value += '/' + std::to_string(prefix);
    } else if (part.kind == KeyPartKind::kIp) {  // '#' and digits (see AppendIp)
      shown.value = "unidentified";
      shown.value += value;
      shown.names_key = false;
    } else if (part.kind == KeyPartKind::kHeader) {
      AppendFingerprint(value, 4, shown.value);
      shown.names_key = false;
    } else if (part.kind == KeyPartKind::kDescriptor) {
      shown.value = value;
      std::replace(shown.value.begin(), shown.value.end(), kEntrySeparator, ',');
      shown.names_key = false;
    } else {
      shown.value = value;
    }
  }
  return parts;
}

std::string DisplayKey(const RuleConfig& rule, std::string_view key) {
  std::string out;
  for (const ShownPart& part : ShownKeyParts(rule, key)) {
    if (!out.empty()) out.push_back(' ');
    out += part.name;
    out.push_back('=');
    out += part.value;
  }
  return out;
}

RuleSet::RuleSet(const std::vector<RuleConfig>& rules, std::vector<std::uint32_t> partitions)
    : rules_(rules), partitions_(std::move(partitions)) {
  partitions_.resize(rules_.size());
}

void RuleSet::Evaluate(const RequestFacts& request, const Identity& identity,
                       Evaluation& out) const {
  out.exempt = nullptr;
  out.priority.reset();
  // Hits in use at the front of each list; the ones behind are the last
  // request's, whose keys' storage is built in again.
  std::size_t hits = 0;
  std::size_t inflight = 0;
  std::size_t messages = 0;
  for (const RuleConfig& rule : rules_) {
    // RLS descriptors and HTTP requests are decided by rules of their own.
    if (rule.match.ForDescriptors() != request.descriptor_call) continue;
    if (!Matches(rule.match, request, identity)) continue;
    if (rule.exempt) {
      out.exempt = &rule;
      hits = inflight = messages = 0;
      break;
    }
    const bool concurrency = rule.max_inflight > 0;
    const bool per_message = rule.per == LimitUnit::kMessage;
    std::vector<RuleHit>& list = concurrency ? out.inflight : per_message ? out.messages : out.hits;
    std::size_t& used = concurrency ? inflight : per_message ? messages : hits;
    if (used == list.size()) list.emplace_back();
    RuleHit& hit = list[used];
    hit.rule = &rule;
    hit.cost = -1;
    hit.body_key = rule.body_key && request.body_fields == nullptr;
    hit.partition = partitions_[static_cast<std::size_t>(&rule - rules_.data())];
    if (!BuildKey(rule, request, identity, hit.key)) continue;
    ++used;
    if (!out.priority && !per_message) out.priority = rule.priority;
    hit.flow = 0;
    if (!rule.fair_key.empty()) {
      // A request without the fair key's parts is a flow of its own kind:
      // the rule's key (never 0, the client's mark).
      thread_local std::string fair;
      fair.clear();
      const bool whole = AppendParts(rule, rule.fair_key, request, identity, fair);
      hit.flow = std::hash<std::string_view>{}(whole ? std::string_view(fair)
                                                     : std::string_view(hit.key)) |
                 1;
    }
  }
  out.hits.resize(hits);
  out.inflight.resize(inflight);
  out.messages.resize(messages);
}

std::string KeyPartName(const KeyPart& part) {
  std::string out(PartName(part));
  if (part.kind == KeyPartKind::kHeader || part.kind == KeyPartKind::kJson) out += part.header;
  return out;
}

std::string RuleConfig::KeyKind() const {
  std::string out;
  for (const KeyPart& part : key) {
    if (!out.empty()) out += '+';
    out += KeyPartName(part);
  }
  return out;
}

}  // namespace tollgate::rules
