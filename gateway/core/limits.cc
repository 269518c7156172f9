#include "gateway/core/limits.h"

#include <algorithm>
#include <cassert>
#include <charconv>

#include "algorithms/decide.h"
#include "gateway/core/descriptor_limit.h"

namespace tollgate::gateway {
namespace {

std::string_view DecisionWord(bool allowed, rules::RuleAction action) {
  if (allowed) return "allowed";
  if (action == rules::RuleAction::kDelay) return "delayed";
  return action == rules::RuleAction::kDryRun ? "dry_run" : "limited";
}

void Record(const LimitContext& context, const rules::RuleConfig& rule, DecisionKind kind) {
  if (context.metrics == nullptr) return;
  context.metrics->RecordDecision((*context.rule_ids)[&rule - context.rules_base], kind);
}

// A decision about `hit`'s key; one that is not kAllowed (limited, delayed,
// dry_run) also counts for the top limited keys.
void Record(const LimitContext& context, const rules::RuleHit& hit, DecisionKind kind) {
  Record(context, *hit.rule, kind);
  if (kind != DecisionKind::kAllowed && context.metrics != nullptr) {
    context.metrics->RecordLimitedKey(hit.key);
  }
}

DecisionKind KindOf(bool allowed, rules::RuleAction action) {
  if (allowed) return DecisionKind::kAllowed;
  if (action == rules::RuleAction::kDelay) return DecisionKind::kDelayed;
  return action == rules::RuleAction::kDryRun ? DecisionKind::kDryRun : DecisionKind::kLimited;
}

}  // namespace

void NoteReservation(const rules::RuleHit& hit, const DecisionBatch& batch, std::size_t i,
                     LimitOutcome& outcome) {
  const rules::RuleConfig& rule = batch.rule(i);
  const store::StoreResult& result = batch.result(i);
  if (!rule.budget.Settles() || result.status != store::StoreStatus::kOk ||
      result.source == store::ResultSource::kPolicyAllowed) {
    return;
  }
  const store::DecideRequest& asked = batch.asked(i);
  outcome.reserved.push_back({hit.rule, &rule, std::string(asked.key), asked.cost, asked.now_ms,
                              asked.partition, asked.key_hash, result.source});
}

void DecisionBatch::Slot::OnDecision(const store::StoreResult& r) {
  result = r;
  if (--batch->pending_ == 0 && batch->waker_ != nullptr) batch->waker_->Wake();
}

void DecisionBatch::Start(const LimitContext& context, std::span<const rules::RuleHit* const> hits,
                          std::int64_t cost, std::span<const std::uint64_t> key_hashes,
                          const rules::DescriptorLimit* descriptor_limit) {
  // Sized before the first Decide(): the store keeps pointers to the slots.
  // The slots of the last batch (done) are reused, not made anew: a
  // tunnel's message rules start a batch per message.
  assert(done());
  assert(key_hashes.empty() || key_hashes.size() == hits.size());
  slots_.resize(hits.size());
  pending_ = hits.size();
  const OverrideSet* overrides =
      context.overrides != nullptr ? context.overrides->Current() : nullptr;
  for (std::size_t i = 0; i < hits.size(); ++i) {
    Slot& slot = slots_[i];
    slot.batch = this;
    slot.rule = hits[i]->rule;
    slot.overridden.reset();
    slot.beyond_capacity = false;
    std::string_view key = hits[i]->key;
    std::uint64_t key_hash = key_hashes.empty() ? 0 : key_hashes[i];
    if (descriptor_limit != nullptr) {
      slot.overridden = WithDescriptorLimit(*slot.rule, *descriptor_limit);
      slot.rule = slot.overridden.get();
      DescriptorLimitKey(*descriptor_limit, key, slot.store_key);
      key = slot.store_key;
      key_hash = 0;
    } else if (overrides != nullptr) {
      if (const AppliedOverride* o = overrides->Find(*slot.rule, key, context.unix_ms)) {
        // A reference of the slot's own: the snapshot may be replaced
        // before a Redis answer comes.
        slot.overridden = o->rule;
        slot.rule = o->rule.get();
        key = o->store_key;
        key_hash = 0;
      }
    }
    const rules::RuleConfig& rule = *slot.rule;
    // A cost from the request of 0 (an empty body's size, "X-Cost: 0")
    // counts as 1: a decision takes at least one unit.
    const std::int64_t hit_cost =
        cost > 0 ? cost : hits[i]->cost >= 0 ? std::max<std::int64_t>(1, hits[i]->cost) : rule.cost;
    // A cost the caller chose (an RLS hits_addend, a check's cost) may be
    // above what the limit can ever allow: refused here for every store
    // alike, before a Lua script or a lease does arithmetic with it.
    if (algorithms::ExceedsCapacity(rule.limit->windows, hit_cost)) {
      slot.beyond_capacity = true;
      slot.OnDecision({store::StoreStatus::kOk, store::ResultSource::kPrimary,
                       algorithms::NeverPasses(rule.limit->windows)});
      continue;
    }
    // A calendar's periods are reckoned on the wall clock (store.h).
    const std::int64_t now = rule.limit->calendar ? context.unix_ms : context.store_now_ms;
    slot.asked = {key, rule.limit.get(), hit_cost, now, hits[i]->partition, key_hash};
    context.store.Decide(slot.asked, slot);
  }
}

namespace {

// Appends "rule:word[suffix]" to outcome.log.
void AppendLog(LimitOutcome& outcome, std::string_view rule, std::string_view word,
               std::string_view suffix) {
  if (!outcome.log.empty()) outcome.log += ',';
  outcome.log += rule;
  outcome.log += ':';
  outcome.log += word;
  outcome.log += suffix;
}

// AppendLog when the access log shows it. Inline, so that a decision
// without a log (a WebSocket tunnel's message) makes no call.
inline void Describe(const LimitContext& context, LimitOutcome& outcome, std::string_view rule,
                     std::string_view word, std::string_view suffix = {}) {
  if (context.describe) AppendLog(outcome, rule, word, suffix);
}

}  // namespace

LimitStart StartLimits(const LimitContext& context, const rules::RequestFacts& request,
                       const rules::Identity& identity, rules::Evaluation& scratch,
                       std::vector<const rules::RuleHit*>& hits, DecisionBatch& batch,
                       LimitOutcome& outcome) {
  if (identity.token == rules::TokenState::kInvalid && context.identity.config().jwt &&
      context.identity.config().jwt->on_invalid == rules::OnInvalidToken::kReject) {
    outcome.verdict = Verdict::kUnauthorized;
    Describe(context, outcome, "jwt", "invalid");
    return LimitStart::kDecided;
  }
  context.rules.Evaluate(request, identity, scratch);
  if (scratch.exempt != nullptr) {
    Describe(context, outcome, scratch.exempt->name, "exempt");
    Record(context, *scratch.exempt, DecisionKind::kExempt);
    return LimitStart::kDecided;
  }
  if (scratch.hits.empty()) return LimitStart::kDecided;
  hits.clear();
  bool needs_body = false;
  for (rules::RuleHit& hit : scratch.hits) {
    hits.push_back(&hit);
    const rules::CostKind kind = hit.rule->budget.cost;
    if (kind == rules::CostKind::kHeader) {
      hit.cost = request.headers != nullptr
                     ? CostFromHeader(request.headers->Get(hit.rule->budget.cost_header),
                                      hit.rule->cost)
                     : hit.rule->cost;
    } else if (kind != rules::CostKind::kFixed && request.cost <= 0) {
      needs_body = true;
    }
    needs_body = needs_body || hit.body_key;
  }
  if (needs_body) return LimitStart::kNeedsBody;
  batch.Start(context, hits, request.cost, {}, request.descriptor_limit);
  return LimitStart::kStarted;
}

std::int64_t CostFromHeader(std::string_view value, std::int64_t otherwise) {
  std::int64_t cost = 0;
  const char* end = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(value.data(), end, cost);
  if (value.empty() || ec != std::errc() || ptr != end || cost < 0) return otherwise;
  return cost;
}

void FinishLimits(const LimitContext& context, std::span<const rules::RuleHit* const> hits,
                  const DecisionBatch& batch, LimitOutcome& outcome) {
  outcome.Reset();
  for (std::size_t i = 0; i < hits.size(); ++i) {
    const rules::RuleHit& hit = *hits[i];
    // Named, counted and shown as the configured rule; its limits (in the
    // response's headers) are an override's when one applies.
    const rules::RuleConfig& rule = batch.rule(i);
    if (batch.overridden(i) != nullptr) outcome.overridden.push_back(batch.overridden(i));
    const store::StoreResult& result = batch.result(i);
    const algorithms::Decision& d = result.decision;
    if (result.status != store::StoreStatus::kOk) {
      Describe(context, outcome, rule.name, "error");
      Record(context, *hit.rule, DecisionKind::kError);
      if (result.source == store::ResultSource::kPolicyDenied) {
        outcome.verdict = Verdict::kStoreUnavailable;
        outcome.shown = &rule;
        outcome.shown_decision = d;
      }
      continue;
    }
    Describe(context, outcome, rule.name, DecisionWord(d.allowed, rule.action),
             result.source == store::ResultSource::kFallback ? "(local)" : "");
    if (d.allowed) NoteReservation(hit, batch, i, outcome);
    Record(context, hit, KindOf(d.allowed, rule.action));
    if (outcome.verdict == Verdict::kStoreUnavailable) continue;
    // (A cost beyond the capacity never passes: refused, not held.)
    if (!d.allowed && rule.action == rules::RuleAction::kDelay && !batch.beyond_capacity(i)) {
      outcome.delayed.push_back({&hit, d, &rule});
      if (outcome.verdict == Verdict::kForward) outcome.verdict = Verdict::kDelay;
      continue;
    }
    const bool enforced = !d.allowed && rule.action != rules::RuleAction::kDryRun;
    if (enforced) {
      // The limiting rule with the longest wait speaks for the response.
      if (outcome.verdict != Verdict::kReject ||
          d.retry_after_ms > outcome.shown_decision.retry_after_ms) {
        outcome.shown = &rule;
        outcome.shown_decision = d;
      }
      outcome.verdict = Verdict::kReject;
      outcome.beyond_capacity = outcome.beyond_capacity || batch.beyond_capacity(i);
      continue;
    }
    if (d.allowed) outcome.delay_ms = std::max(outcome.delay_ms, d.delay_ms);
    if (outcome.verdict == Verdict::kForward && rule.headers == rules::RateLimitHeaders::kAll &&
        (outcome.shown == nullptr || d.remaining < outcome.shown_decision.remaining)) {
      outcome.shown = &rule;
      outcome.shown_decision = d;
    }
  }
}

void NoteInflight(const LimitContext& context, const rules::RuleHit& hit, bool admitted,
                  LimitOutcome& outcome) {
  Describe(context, outcome, hit.rule->name, admitted ? "allowed" : "limited");
  Record(context, hit, admitted ? DecisionKind::kAllowed : DecisionKind::kLimited);
}

std::int64_t DelayFor(const rules::RuleConfig& rule, const algorithms::Decision& decision,
                      std::size_t queued, std::int64_t now_ms) {
  const auto& windows = rule.limit->windows;
  if (windows.size() == 1 && windows[0].algorithm == algorithms::Algorithm::kFixedWindow &&
      windows[0].limit > 0) {
    const std::int64_t w = windows[0].window_ms;
    const std::int64_t index = now_ms / w;
    const std::int64_t ready =
        (index + 1) * w + static_cast<std::int64_t>(queued) / windows[0].limit * w;
    return ready - now_ms;
  }
  return decision.retry_after_ms;
}

}  // namespace tollgate::gateway
