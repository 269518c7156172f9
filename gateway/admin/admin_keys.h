// The admin API's way of naming one rule key: the query of
// /api/v1/keys?rule=NAME&<part>=<value>... (docs/admin-api.md), turned
// into the store key the request path builds for such a request
// (rules::BuildKey, the same function). Pure; thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rules/config.h"
#include "rules/identity.h"
#include "rules/request_facts.h"

namespace tollgate::gateway {

// Why a query names no key.
enum class KeyQueryError : std::uint8_t {
  kNone,
  kUnknownRule,  // 404: `field` is "rule"
  kBadField,     // 400: `field` names the parameter, `message` why
};

// The header parts of a key's query, as the request path's header lookup.
class QueryHeaders final : public rules::HeaderLookup {
 public:
  void Add(std::string name, std::string value);
  std::string_view Get(std::string_view name) const override;
  std::string GetJoined(std::string_view name) const override;

 private:
  std::vector<std::pair<std::string, std::string>> values_;
};

struct KeyQuery {
  KeyQueryError error = KeyQueryError::kNone;
  std::string field;
  std::string message;
  // kNone: the rule (in the configuration given) and its key.
  const rules::RuleConfig* rule = nullptr;
  std::size_t rule_index = 0;
  std::string key;
  // Who the key's parts name (an unidentified client when there is no ip
  // part) and its header parts: what blocks are matched against.
  rules::Identity identity;
  QueryHeaders headers;
};

// `query`: the target's part after '?', percent-encoded. Parameters are
// `rule` and one per part of the rule's key: `ip` (an address; an IPv6
// one may name its network, "2001:db8:1:2::/64", with [identity]
// ipv6_prefix bits), `user`, `role`, `route`, `header:NAME` (the name in
// any case), `json:PATH` (a value of the JSON request body), `descriptor` (an RLS descriptor's entries as
// "key=value,key=value"); `global` needs none. A rule without rate-limit
// state (exempt, max_inflight) names no key.
KeyQuery ParseKeyQuery(const rules::Config& config, std::string_view query);
// The same from the rule's name and the parts (name, value) already
// decoded; `field_prefix` goes before a part's name in KeyQuery::field
// ("key." for a JSON body's "key" object).
KeyQuery ParseKeyParts(const rules::Config& config, std::string_view rule_name,
                       const std::vector<std::pair<std::string, std::string>>& params,
                       std::string_view field_prefix = {});

// The decoded parameters of `query` (the part after '?') in order, or
// nullopt for a query that is no valid percent-encoded text.
std::optional<std::vector<std::pair<std::string, std::string>>> QueryParams(
    std::string_view query);

// The decoded value of the first parameter `name` of `query` (the part
// after '?'), or nullopt (absent, or a query that is no valid
// percent-encoded text).
std::optional<std::string> QueryValue(std::string_view query, std::string_view name);

}  // namespace tollgate::gateway
