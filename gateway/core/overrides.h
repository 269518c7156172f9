// Overrides set at run time through the admin API (docs/admin-api.md):
// one key of a rate rule decided against other limits until a time (a
// tenant raised, an abuser lowered). An overridden key is decided against a
// state of its own, under the store key kOverrideKeyMark + its key, so that
// a changed limit is decided exactly from a fresh state and the key's
// state under the rule's limits is left as it was; the LimitSpec's
// fingerprint tells an override's successive limits apart. An OverrideSet
// is an immutable snapshot compiled against one configuration's rules
// (gateway/admin/admin_overrides.h makes it); the OverrideTable holds the one
// in force, so that overrides survive reloads. Pure (no I/O); thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gateway/core/snapshot_table.h"
#include "rules/rule.h"

namespace tollgate::gateway {

// The first byte of an overridden key's store key. Rule keys start with
// the rule's name, which is printable ASCII: never this.
inline constexpr char kOverrideKeyMark = '\x1e';

struct AppliedOverride {
  // The rule as the override decides its key: the configured rule with the
  // override's limits and windows. Shared by the overrides of one rule
  // with the same limits; callers that keep it past the call hold a copy.
  std::shared_ptr<const rules::RuleConfig> rule;
  std::string store_key;  // kOverrideKeyMark + the rule's key
  std::int64_t expires_unix_ms = 0;  // wall clock, ms
};

class OverrideSet {
 public:
  struct Entry {
    std::size_t rule_index = 0;  // in the `rules` given to the constructor
    std::string key;             // the rule's key (rules::BuildKey)
    AppliedOverride applied;
  };
  // `rules`: the configuration's rules the entries refer to by index. Only
  // its address and the rules' names are kept: rules of that configuration
  // are found by their place, those of another (after a reload, until a new
  // set is made) by name.
  OverrideSet(std::span<const rules::RuleConfig> rules, std::vector<Entry> entries);

  // The override of `rule`'s `key` that is not over at now_unix_ms, or
  // null. A rule with no override costs a comparison of its name; one with
  // some, a hash lookup.
  const AppliedOverride* Find(const rules::RuleConfig& rule, std::string_view key,
                              std::int64_t now_unix_ms) const;
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  struct RuleOverrides {
    std::string rule;  // its name
    std::unordered_map<std::string, AppliedOverride, Hash, std::equal_to<>> keys;
  };
  const RuleOverrides* Of(const rules::RuleConfig& rule) const;

  std::uintptr_t base_ = 0;  // the address of the rules made for
  std::size_t rule_count_ = 0;
  struct Place {
    std::string rule;                     // the name of the rule there
    const RuleOverrides* of = nullptr;  // null: the rule has none
  };
  std::vector<Place> by_index_;
  std::unordered_map<std::string, RuleOverrides> by_name_;
  std::size_t size_ = 0;
};

using OverrideTable = SnapshotTable<OverrideSet>;

}  // namespace tollgate::gateway
