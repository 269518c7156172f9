// An RLS descriptor's own limit (rules::DescriptorLimit, Envoy's
// RateLimitDescriptor.limit) in place of a rule's, as envoyproxy/ratelimit
// applies it: a fixed window of `limit` requests per unit, aligned to the
// unit. The rule keeps its name, key, action and headers; its limits and
// windows are the descriptor's. Such a key is decided against a state of
// its own, under kDescriptorLimitKeyMark, the limit and the rule's key, so
// that neither the rule's own state of the key nor the state under
// another descriptor limit is touched. Pure; thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "rules/request_facts.h"
#include "rules/rule.h"

namespace tollgate::gateway {

// The first byte of a key decided by a descriptor's limit. Rule keys start
// with the rule's name (printable ASCII) and admin overrides' with
// kOverrideKeyMark (gateway/core/overrides.h): never this.
inline constexpr char kDescriptorLimitKeyMark = '\x1d';

// `rule` with `limit`'s fixed window as its limits. `limit` must be valid
// (RLS requests are checked when read, gateway/decision/rls.h).
std::shared_ptr<const rules::RuleConfig> WithDescriptorLimit(const rules::RuleConfig& rule,
                                                             const rules::DescriptorLimit& limit);

// The store key of the rule key `key` under `limit`, into `out`.
void DescriptorLimitKey(const rules::DescriptorLimit& limit, std::string_view key,
                        std::string& out);

}  // namespace tollgate::gateway
