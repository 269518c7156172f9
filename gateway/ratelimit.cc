#include "gateway/ratelimit.h"

#include <fmt/format.h>

#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>
#include <iterator>

namespace tollgate::gateway {
namespace {

std::int64_t CeilSeconds(std::int64_t ms) { return (ms + 999) / 1000; }

class InlineSink final : public store::DecisionSink {
 public:
  void OnDecision(const store::StoreResult& r) override {
    result = r;
    done = true;
  }
  store::StoreResult result;
  bool done = false;
};

std::string_view DecisionWord(bool allowed, rules::RuleAction action) {
  if (allowed) return "allowed";
  if (action == rules::RuleAction::kDelay) return "delayed";
  return action == rules::RuleAction::kDryRun ? "dry_run" : "limited";
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

LimitOutcome DecideLimits(const LimitContext& context, const rules::RequestFacts& request,
                          const rules::Identity& identity, rules::Evaluation& scratch) {
  LimitOutcome outcome;
  if (identity.token == rules::TokenState::kInvalid && context.identity.config().jwt &&
      context.identity.config().jwt->on_invalid == rules::OnInvalidToken::kReject) {
    outcome.verdict = Verdict::kUnauthorized;
    outcome.log = "jwt:invalid";
    return outcome;
  }
  context.rules.Evaluate(request, identity, scratch);
  if (scratch.exempt != nullptr) {
    outcome.log = scratch.exempt->name + ":exempt";
    return outcome;
  }
  for (const rules::RuleHit& hit : scratch.hits) {
    const rules::RuleConfig& rule = *hit.rule;
    InlineSink sink;
    context.store.Decide({hit.key, rule.limit.get(), rule.cost, context.now_ms}, sink);
    // Every store the gateway runs today completes inline.
    const algorithms::Decision& d = sink.result.decision;
    if (!outcome.log.empty()) outcome.log += ',';
    outcome.log += rule.name;
    outcome.log += ':';
    outcome.log += DecisionWord(d.allowed, rule.action);
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

algorithms::Decision DecideAgain(store::Store& store, const rules::RuleHit& hit,
                                 std::int64_t now_ms) {
  InlineSink sink;
  store.Decide({hit.key, hit.rule->limit.get(), hit.rule->cost, now_ms}, sink);
  return sink.result.decision;
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

void AppendRateLimitHeaders(const rules::RuleConfig& rule, const algorithms::Decision& d,
                            std::string& out) {
  if (rule.headers == rules::RateLimitHeaders::kNone) return;
  const std::size_t w = std::min<std::size_t>(d.window, rule.windows.size() - 1);
  const auto policy_name = [&](std::size_t i) {
    return rule.windows.size() == 1 ? rule.name : rule.name + ":" + rule.windows[i].text;
  };
  out += "RateLimit-Policy: ";
  for (std::size_t i = 0; i < rule.windows.size(); ++i) {
    if (i > 0) out += ", ";
    fmt::format_to(std::back_inserter(out), "\"{}\";q={};w={}", policy_name(i),
                   rule.limit->windows[i].limit, rule.windows[i].seconds);
  }
  const std::int64_t reset_s = CeilSeconds(d.window_reset_ms);
  const std::int64_t remaining = std::max<std::int64_t>(0, d.remaining);
  fmt::format_to(std::back_inserter(out),
                 "\r\nRateLimit: \"{}\";r={};t={}\r\nX-RateLimit-Limit: {}\r\n"
                 "X-RateLimit-Remaining: {}\r\nX-RateLimit-Reset: {}\r\n",
                 policy_name(w), remaining, reset_s, rule.limit->windows[w].limit, remaining,
                 reset_s);
}

std::size_t AppendLimitedResponse(const rules::RuleConfig& rule, const algorithms::Decision& d,
                                  bool keep_alive, std::string& out) {
  // Rule names come from the configuration; JSON-escape them all the same.
  const std::string body =
      fmt::format("{{\"error\":\"rate_limited\",\"rule\":{},\"retry_after_ms\":{}}}\n",
                  boost::json::serialize(boost::json::string(rule.name)), d.retry_after_ms);
  const auto status = static_cast<http::status>(rule.status);
  fmt::format_to(std::back_inserter(out),
                 "HTTP/1.1 {} {}\r\nServer: tollgate\r\nContent-Type: application/json\r\n"
                 "Retry-After: {}\r\nContent-Length: {}\r\n{}",
                 rule.status, std::string_view(http::obsolete_reason(status)),
                 std::max<std::int64_t>(1, CeilSeconds(d.retry_after_ms)), body.size(),
                 keep_alive ? "" : "Connection: close\r\n");
  AppendRateLimitHeaders(rule, d, out);
  out += "\r\n";
  out += body;
  return body.size();
}

}  // namespace tollgate::gateway
