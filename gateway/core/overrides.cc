#include "gateway/core/overrides.h"

namespace tollgate::gateway {

OverrideSet::OverrideSet(std::span<const rules::RuleConfig> rules, std::vector<Entry> entries)
    : base_(reinterpret_cast<std::uintptr_t>(rules.data())),
      rule_count_(rules.size()),
      by_index_(rules.size()) {
  for (Entry& e : entries) {
    const rules::RuleConfig& rule = rules[e.rule_index];
    RuleOverrides& of = by_name_[rule.name];
    of.rule = rule.name;
    of.keys.insert_or_assign(std::move(e.key), std::move(e.applied));
  }
  for (std::size_t i = 0; i < rules.size(); ++i) {
    by_index_[i].rule = rules[i].name;
    const auto it = by_name_.find(rules[i].name);
    if (it != by_name_.end()) by_index_[i].of = &it->second;
  }
  for (const auto& [name, of] : by_name_) size_ += of.keys.size();
}

const OverrideSet::RuleOverrides* OverrideSet::Of(const rules::RuleConfig& rule) const {
  const auto at = reinterpret_cast<std::uintptr_t>(&rule);
  if (at >= base_ && at < base_ + rule_count_ * sizeof(rules::RuleConfig)) {
    const Place& place = by_index_[(at - base_) / sizeof(rules::RuleConfig)];
    // A later configuration's rules may sit where the set's were.
    if (place.rule == rule.name) return place.of;
  }
  const auto it = by_name_.find(rule.name);
  return it == by_name_.end() ? nullptr : &it->second;
}

const AppliedOverride* OverrideSet::Find(const rules::RuleConfig& rule, std::string_view key,
                                         std::int64_t now_unix_ms) const {
  const RuleOverrides* of = Of(rule);
  if (of == nullptr) return nullptr;
  const auto it = of->keys.find(key);
  if (it == of->keys.end() || it->second.expires_unix_ms <= now_unix_ms) return nullptr;
  return &it->second;
}

}  // namespace tollgate::gateway
