#include "gateway/admin/admin_keys.h"

#include <algorithm>
#include <boost/url/params_encoded_view.hpp>
#include <boost/url/parse_query.hpp>
#include <cctype>
#include <optional>
#include <utility>
#include <vector>

#include "rules/rule_set.h"

namespace tollgate::gateway {
namespace {

bool SameName(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

KeyQuery Bad(std::string field, std::string message) {
  KeyQuery q;
  q.error = KeyQueryError::kBadField;
  q.field = std::move(field);
  q.message = std::move(message);
  return q;
}

// The part of `rule`'s key a parameter names, or null.
const rules::KeyPart* PartNamed(const rules::RuleConfig& rule, std::string_view name) {
  for (const rules::KeyPart& part : rule.key) {
    if (part.kind == rules::KeyPartKind::kHeader) {
      if (name.starts_with("header:") && SameName(name.substr(7), part.header)) return &part;
    } else if (rules::KeyPartName(part) == name) {
      return &part;
    }
  }
  return nullptr;
}

std::string PartList(const rules::RuleConfig& rule) {
  std::string out;
  for (const rules::KeyPart& part : rule.key) {
    if (!out.empty()) out += ", ";
    out += rules::KeyPartName(part);
  }
  return out;
}

// An address, or an IPv6 network of `ipv6_prefix` bits as the `ip` key
// shows it.
std::optional<rules::IpAddress> ParseIp(std::string_view text, int ipv6_prefix) {
  if (text.find('/') == std::string_view::npos) return rules::IpAddress::Parse(text);
  const std::optional<rules::Cidr> network = rules::Cidr::Parse(text);
  if (!network || network->network.v4 || network->prefix_length != ipv6_prefix) {
    return std::nullopt;
  }
  return network->network;
}

}  // namespace

void QueryHeaders::Add(std::string name, std::string value) {
  values_.emplace_back(std::move(name), std::move(value));
}

std::string_view QueryHeaders::Get(std::string_view name) const {
  for (const auto& [n, v] : values_) {
    if (SameName(n, name)) return v;
  }
  return {};
}

std::string QueryHeaders::GetJoined(std::string_view name) const { return std::string(Get(name)); }

std::optional<std::string> QueryValue(std::string_view query, std::string_view name) {
  std::optional<std::vector<std::pair<std::string, std::string>>> params = QueryParams(query);
  if (!params) return std::nullopt;
  for (auto& [key, value] : *params) {
    if (key == name) return std::move(value);
  }
  return std::nullopt;
}

std::optional<std::vector<std::pair<std::string, std::string>>> QueryParams(
    std::string_view query) {
  // A copy: Boost 1.81's parse_query reads the last value up to a NUL,
  // past the end of a view into a larger buffer.
  const std::string owned(query);
  auto parsed = boost::urls::parse_query(owned);
  if (!parsed) return std::nullopt;
  std::vector<std::pair<std::string, std::string>> params;
  for (const boost::urls::param_pct_view& p : *parsed) {
    params.emplace_back(p.key.decode(), p.value.decode());
  }
  return params;
}

KeyQuery ParseKeyQuery(const rules::Config& config, std::string_view query) {
  std::optional<std::vector<std::pair<std::string, std::string>>> all = QueryParams(query);
  if (!all) return Bad("query", "the query is not valid percent-encoded text");
  std::vector<std::pair<std::string, std::string>> params;
  std::optional<std::string> rule_name;
  for (auto& [key, value] : *all) {
    if (key == "rule") {
      rule_name = std::move(value);
    } else {
      params.emplace_back(std::move(key), std::move(value));
    }
  }
  if (!rule_name) return Bad("rule", "missing: name the rule with rule=NAME");
  return ParseKeyParts(config, *rule_name, params);
}

KeyQuery ParseKeyParts(const rules::Config& config, std::string_view rule_name,
                       const std::vector<std::pair<std::string, std::string>>& params,
                       std::string_view field_prefix) {
  KeyQuery out;
  for (std::size_t i = 0; i < config.rules.size(); ++i) {
    if (config.rules[i].name == rule_name) {
      out.rule = &config.rules[i];
      out.rule_index = i;
    }
  }
  if (out.rule == nullptr) {
    out.error = KeyQueryError::kUnknownRule;
    out.field = "rule";
    out.message = "no rule named \"" + std::string(rule_name) + "\"";
    return out;
  }
  const rules::RuleConfig& rule = *out.rule;
  if (rule.limit == nullptr) {
    return Bad("rule", "rule \"" + rule.name + "\" keeps no rate-limit state (" +
                           (rule.exempt ? "exempt" : "max_inflight") + ")");
  }
  rules::Identity& identity = out.identity;
  identity.ipv6_prefix = config.identity.ipv6_prefix;
  // Without an ip part the key names no address: no IP block applies to it.
  identity.unidentified_client = "(no ip part)";
  QueryHeaders& headers = out.headers;
  QueryHeaders body;  // json:PATH parts, by path
  rules::RequestFacts facts;
  facts.headers = &headers;
  facts.body_fields = &body;
  std::vector<bool> given(rule.key.size(), false);
  std::vector<rules::DescriptorEntry> descriptor;  // views into `params`
  for (const auto& [name, value] : params) {
    const rules::KeyPart* part = PartNamed(rule, name);
    const std::string field = std::string(field_prefix) + name;
    if (part == nullptr) {
      return Bad(field, "the key of rule \"" + rule.name + "\" has no such part; its parts: " +
                           PartList(rule));
    }
    const std::size_t index = static_cast<std::size_t>(part - rule.key.data());
    if (given[index]) return Bad(field, "given twice");
    given[index] = true;
    if (part->kind != rules::KeyPartKind::kGlobal && value.empty()) return Bad(field, "empty");
    switch (part->kind) {
      case rules::KeyPartKind::kIp: {
        const std::optional<rules::IpAddress> ip = ParseIp(value, identity.ipv6_prefix);
        if (!ip) {
          return Bad(field, "\"" + value + "\" is not an IP address (nor an IPv6 network of " +
                               std::to_string(identity.ipv6_prefix) + " bits)");
        }
        identity.client_ip = *ip;
        identity.unidentified_client.clear();
        break;
      }
      case rules::KeyPartKind::kUser:
        identity.user = value;
        break;
      case rules::KeyPartKind::kRole:
        identity.role = value;
        break;
      case rules::KeyPartKind::kRoute:
        facts.route = value;
        break;
      case rules::KeyPartKind::kHeader:
        headers.Add(part->header, value);
        break;
      case rules::KeyPartKind::kJson:
        body.Add(part->header, value);
        break;
      case rules::KeyPartKind::kGlobal:
        break;
      case rules::KeyPartKind::kDescriptor:
        // "key=value,key=value": the entries as GET shows them.
        for (std::string_view rest = value; !rest.empty();) {
          const std::string_view entry = rest.substr(0, rest.find(','));
          rest.remove_prefix(std::min(rest.size(), entry.size() + 1));
          const std::size_t eq = entry.find('=');
          if (eq == 0 || eq == std::string_view::npos) {
            return Bad(field, "\"" + std::string(entry) +
                                  "\" is not an entry: give the descriptor as key=value,key=value");
          }
          descriptor.push_back({entry.substr(0, eq), entry.substr(eq + 1)});
        }
        break;
    }
  }
  for (std::size_t i = 0; i < rule.key.size(); ++i) {
    if (!given[i] && rule.key[i].kind != rules::KeyPartKind::kGlobal) {
      return Bad(std::string(field_prefix) + rules::KeyPartName(rule.key[i]), "missing: the key of rule \"" + rule.name +
                                                      "\" is made of " + PartList(rule));
    }
  }
  facts.descriptor = descriptor;
  rules::BuildKey(rule, facts, identity, out.key);
  return out;
}

}  // namespace tollgate::gateway
