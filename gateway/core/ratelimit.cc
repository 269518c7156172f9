#include "gateway/core/ratelimit.h"

#include <fmt/format.h>

#include <algorithm>

namespace tollgate::gateway {
namespace {

std::int64_t CeilSeconds(std::int64_t ms) { return (ms + 999) / 1000; }

// Responses are built with appends: fmt::format_to through a
// back_insert_iterator resizes (zero-fills) the string once per piece.
void AppendInt(std::int64_t value, std::string& out) {
  const fmt::format_int text(value);
  out.append(text.data(), text.size());
}

// A rule's name inside a quoted string: '"' and '\\' get a backslash, which
// is the escape of both a JSON string and an RFC 8941 string (the
// RateLimit fields). Names are printable ASCII (checked when the
// configuration is read), which both hold as they are otherwise.
bool Escaped(char c) { return c == '"' || c == '\\'; }

void AppendEscapedName(std::string_view name, std::string& out) {
  for (const char c : name) {
    if (Escaped(c)) out += '\\';
    out += c;
  }
}

std::size_t EscapedNameSize(std::string_view name) {
  return name.size() + static_cast<std::size_t>(std::count_if(name.begin(), name.end(), Escaped));
}

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

std::string_view FieldsLookup::Get(std::string_view name) const {
  auto it = fields_.find(name);
  return it == fields_.end() ? std::string_view() : std::string_view(it->value());
}

std::string FieldsLookup::GetJoined(std::string_view name) const {
  std::string out;
  auto [first, last] = fields_.equal_range(name);
  for (auto it = first; it != last; ++it) {
    if (!out.empty()) out += ", ";
    out.append(it->value().data(), it->value().size());
  }
  return out;
}

void DecisionBatch::Slot::OnDecision(const store::StoreResult& r) {
  result = r;
  if (--batch->pending_ == 0) batch->timer_.cancel();
}

void DecisionBatch::Start(store::Store& store, std::span<const rules::RuleHit* const> hits,
                          std::int64_t now_ms) {
  // Sized before the first Decide(): the store keeps pointers to the slots.
  slots_.clear();
  slots_.resize(hits.size());
  pending_ = hits.size();
  for (std::size_t i = 0; i < hits.size(); ++i) {
    slots_[i].batch = this;
    const rules::RuleConfig& rule = *hits[i]->rule;
    store.Decide({hits[i]->key, rule.limit.get(), rule.cost, now_ms, hits[i]->partition},
                 slots_[i]);
  }
}

Task<void> DecisionBatch::Wait() {
  while (pending_ > 0) {
    timer_.expires_at(Timer::time_point::max());
    co_await timer_.async_wait(kUseTuple);
  }
}

namespace {

// Appends "rule:word[suffix]" to outcome.log when the access log shows it.
void Describe(const LimitContext& context, LimitOutcome& outcome, std::string_view rule,
              std::string_view word, std::string_view suffix = {}) {
  if (!context.describe) return;
  if (!outcome.log.empty()) outcome.log += ',';
  outcome.log += rule;
  outcome.log += ':';
  outcome.log += word;
  outcome.log += suffix;
}

}  // namespace

bool StartLimits(const LimitContext& context, const rules::RequestFacts& request,
                 const rules::Identity& identity, rules::Evaluation& scratch,
                 std::vector<const rules::RuleHit*>& hits, DecisionBatch& batch,
                 LimitOutcome& outcome) {
  if (identity.token == rules::TokenState::kInvalid && context.identity.config().jwt &&
      context.identity.config().jwt->on_invalid == rules::OnInvalidToken::kReject) {
    outcome.verdict = Verdict::kUnauthorized;
    Describe(context, outcome, "jwt", "invalid");
    return true;
  }
  context.rules.Evaluate(request, identity, scratch);
  if (scratch.exempt != nullptr) {
    Describe(context, outcome, scratch.exempt->name, "exempt");
    Record(context, *scratch.exempt, DecisionKind::kExempt);
    return true;
  }
  if (scratch.hits.empty()) return true;
  hits.clear();
  for (const rules::RuleHit& hit : scratch.hits) hits.push_back(&hit);
  batch.Start(context.store, hits, context.store_now_ms);
  return false;
}

LimitOutcome FinishLimits(const LimitContext& context, std::span<const rules::RuleHit* const> hits,
                          const DecisionBatch& batch) {
  LimitOutcome outcome;
  for (std::size_t i = 0; i < hits.size(); ++i) {
    const rules::RuleHit& hit = *hits[i];
    const rules::RuleConfig& rule = *hit.rule;
    const store::StoreResult& result = batch.result(i);
    const algorithms::Decision& d = result.decision;
    if (result.status != store::StoreStatus::kOk) {
      Describe(context, outcome, rule.name, "error");
      Record(context, rule, DecisionKind::kError);
      if (result.source == store::ResultSource::kPolicyDenied) {
        outcome.verdict = Verdict::kStoreUnavailable;
        outcome.shown = &rule;
        outcome.shown_decision = d;
      }
      continue;
    }
    Describe(context, outcome, rule.name, DecisionWord(d.allowed, rule.action),
             result.source == store::ResultSource::kFallback ? "(local)" : "");
    Record(context, hit, KindOf(d.allowed, rule.action));
    if (outcome.verdict == Verdict::kStoreUnavailable) continue;
    if (!d.allowed && rule.action == rules::RuleAction::kDelay) {
      outcome.delayed.push_back({&hit, d});
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
      continue;
    }
    if (d.allowed) outcome.delay_ms = std::max(outcome.delay_ms, d.delay_ms);
    if (outcome.verdict == Verdict::kForward && rule.headers == rules::RateLimitHeaders::kAll &&
        (outcome.shown == nullptr || d.remaining < outcome.shown_decision.remaining)) {
      outcome.shown = &rule;
      outcome.shown_decision = d;
    }
  }
  return outcome;
}

void NoteInflight(const LimitContext& context, const rules::RuleHit& hit, bool admitted,
                  LimitOutcome& outcome) {
  Describe(context, outcome, hit.rule->name, admitted ? "allowed" : "limited");
  Record(context, hit, admitted ? DecisionKind::kAllowed : DecisionKind::kLimited);
}

void CountCall::OnCount(const store::CountResult& result) {
  result_ = result;
  done_ = true;
  timer_.cancel();
}

Task<store::CountResult> CountCall::Wait() {
  while (!done_) {
    timer_.expires_at(Timer::time_point::max());
    co_await timer_.async_wait(kUseTuple);
  }
  co_return result_;
}

std::int64_t DelayFor(const rules::RuleConfig& rule, const algorithms::Decision& decision,
                      std::size_t queued, std::int64_t now_ms) {
  const auto& windows = rule.limit->windows;
  if (windows.size() == 1 && windows[0].algorithm == algorithms::Algorithm::kFixedWindow) {
    const std::int64_t w = windows[0].window_ms;
    const std::int64_t index = now_ms / w;
    const std::int64_t ready =
        (index + 1) * w + static_cast<std::int64_t>(queued) / windows[0].limit * w;
    return ready - now_ms;
  }
  return decision.retry_after_ms;
}

namespace {

// The policy of window `i` as a structured-field string: the rule's name,
// and ":" and the window as written when the rule has several.
void AppendPolicyName(const rules::RuleConfig& rule, std::size_t i, std::string& out) {
  out += '"';
  AppendEscapedName(rule.name, out);
  if (rule.windows.size() > 1) {
    out += ':';
    out += rule.windows[i].text;
  }
  out += '"';
}

}  // namespace

void AppendRateLimitHeaders(const rules::RuleConfig& rule, const algorithms::Decision& d,
                            std::string& out) {
  if (rule.headers == rules::RateLimitHeaders::kNone) return;
  const std::size_t w = std::min<std::size_t>(d.window, rule.windows.size() - 1);
  out += "RateLimit-Policy: ";
  for (std::size_t i = 0; i < rule.windows.size(); ++i) {
    if (i > 0) out += ", ";
    AppendPolicyName(rule, i, out);
    out += ";q=";
    AppendInt(rule.limit->windows[i].limit, out);
    out += ";w=";
    AppendInt(rule.windows[i].seconds, out);
  }
  const std::int64_t reset_s = CeilSeconds(d.window_reset_ms);
  const std::int64_t remaining = std::max<std::int64_t>(0, d.remaining);
  out += "\r\nRateLimit: ";
  AppendPolicyName(rule, w, out);
  out += ";r=";
  AppendInt(remaining, out);
  out += ";t=";
  AppendInt(reset_s, out);
  out += "\r\nX-RateLimit-Limit: ";
  AppendInt(rule.limit->windows[w].limit, out);
  out += "\r\nX-RateLimit-Remaining: ";
  AppendInt(remaining, out);
  out += "\r\nX-RateLimit-Reset: ";
  AppendInt(reset_s, out);
  out += "\r\n";
}

std::size_t AppendLimitedResponse(const rules::RuleConfig& rule, const algorithms::Decision& d,
                                  bool keep_alive, std::string& out) {
  static constexpr std::string_view kBodyStart = R"({"error":"rate_limited","rule":")";
  static constexpr std::string_view kBodyRetry = R"(","retry_after_ms":)";
  static constexpr std::string_view kBodyEnd = "}\n";
  const fmt::format_int retry_after_ms(d.retry_after_ms);
  const std::size_t body_size = kBodyStart.size() + EscapedNameSize(rule.name) + kBodyRetry.size() +
                                retry_after_ms.size() + kBodyEnd.size();
  out += "HTTP/1.1 ";
  AppendInt(rule.status, out);
  out += ' ';
  out += std::string_view(http::obsolete_reason(static_cast<http::status>(rule.status)));
  out += "\r\nServer: tollgate\r\nContent-Type: application/json\r\nRetry-After: ";
  AppendInt(std::max<std::int64_t>(1, CeilSeconds(d.retry_after_ms)), out);
  out += "\r\nContent-Length: ";
  AppendInt(static_cast<std::int64_t>(body_size), out);
  out += "\r\n";
  if (!keep_alive) out += "Connection: close\r\n";
  AppendRateLimitHeaders(rule, d, out);
  out += "\r\n";
  out += kBodyStart;
  AppendEscapedName(rule.name, out);
  out += kBodyRetry;
  out.append(retry_after_ms.data(), retry_after_ms.size());
  out += kBodyEnd;
  return body_size;
}

}  // namespace tollgate::gateway
