// Which rules apply to a request and under which store keys. Rules are
// evaluated in file order; every matching rule applies, and the first
// matching exempt rule stops the evaluation. Immutable; thread-safe. Refers
// to the RuleConfigs it was built from, which must outlive it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rules/identity.h"
#include "rules/request_facts.h"
#include "rules/rule.h"

namespace tollgate::rules {

struct RuleHit {
  const RuleConfig* rule = nullptr;
  std::string key;  // for the store; bounded, see BuildKey
  // The rule's partition of the local store (DecideRequest::partition).
  std::uint32_t partition = 0;
  // What this request costs under the rule when the cost comes from the
  // request (budget.cost: a header, the body, an LLM preset); -1: the
  // rule's own cost. Set by the gateway after Evaluate, which resets it.
  std::int64_t cost = -1;
  // The key lacks its json:PATH parts: AppendBodyKey once the body is read.
  bool body_key = false;
  // A hash of the rule's fair_key for this request (its flow when it
  // waits); 0: the rule has none (the flow is the client).
  std::uint64_t flow = 0;
};

// Reused from request to request: Evaluate builds keys in the storage of
// the hits of the one before.
struct Evaluation {
  const RuleConfig* exempt = nullptr;  // the exempt rule that matched, if any
  std::vector<RuleHit> hits;           // the rate rules (per request) that apply, in file order
  std::vector<RuleHit> inflight;       // the concurrency rules (max_inflight) that apply
  // The per = "message" rate rules that apply: never decided for the
  // request itself; a WebSocket handshake hands them to its tunnel.
  std::vector<RuleHit> messages;
  // The first matching rule's `priority` (rate or concurrency rules).
  std::optional<Priority> priority;
};

class RuleSet {
 public:
  // `partitions`: each rule's local store partition, by index in `rules`
  // (LocalStore::AssignPartitions); empty: partition 0 for all.
  explicit RuleSet(const std::vector<RuleConfig>& rules,
                   std::vector<std::uint32_t> partitions = {});
  void Evaluate(const RequestFacts& request, const Identity& identity, Evaluation& out) const;
  bool empty() const { return rules_.empty(); }
  const std::vector<std::uint32_t>& partitions() const { return partitions_; }

 private:
  const std::vector<RuleConfig>& rules_;
  std::vector<std::uint32_t> partitions_;  // one per rule
};

bool Matches(const RuleMatch& match, const RequestFacts& request, const Identity& identity);

// "<rule>\x1f<part>\x1f<part>..." into `key` (replacing what it held, in
// its storage): a part longer than kMaxKeyPart bytes is replaced by "#" and
// 32 hex digits of its SHA-256, so keys stay short and a client cannot
// choose a long key. The `ip` part is raw bytes: an IPv4 address, an IPv6
// client's network (Identity::ipv6_prefix) or an unidentified client's
// fingerprint, never one for another. False when the request lacks a part
// (no user, no role, no such header): the rule does not apply to it.
// Without request.body_fields, a key with json:PATH parts is built up to
// them (they come last): AppendBodyKey adds them once the body is read.
inline constexpr std::size_t kMaxKeyPart = 64;
bool BuildKey(const RuleConfig& rule, const RequestFacts& request, const Identity& identity,
              std::string& key);
// The json:PATH parts of `rule`'s key appended to `key` (built by BuildKey
// without the body), from `body_fields`; false when the body lacks one (the
// rule does not apply to the request).
bool AppendBodyKey(const RuleConfig& rule, const HeaderLookup& body_fields, std::string& key);

// A key built by BuildKey for `rule`, for people: its parts after the rule's
// name as "ip=192.0.2.1 user=alice route=api" ("ip=2001:db8:1:2::/64" for
// an IPv6 network, "ip=unidentified#<digits>" for a client named by no
// address). Header values are shown as a fingerprint
// ("header:x-api-key=#1f2e3d4c"): they may be credentials.
std::string DisplayKey(const RuleConfig& rule, std::string_view key);

// One part of a key as DisplayKey shows it.
struct ShownPart {
  std::string name;   // as the admin API's queries name it: "ip", "header:X-Api-Key"
  std::string value;  // as shown
  // Whether `value` names the part's value (and so the key, in an admin
  // API query); false for a header's fingerprint, an unidentified client
  // and a descriptor's entries.
  bool names_key = true;
};
// The parts of a key built by BuildKey for `rule`, in the rule's order.
std::vector<ShownPart> ShownKeyParts(const RuleConfig& rule, std::string_view key);

// A key part as configured: "ip", "user", "role", "global", "route",
// "header:X-Api-Key".
std::string KeyPartName(const KeyPart& part);

}  // namespace tollgate::rules
