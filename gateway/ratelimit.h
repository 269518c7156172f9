// The identify -> match -> decide steps of a request, and what a client sees
// of the decision: the IETF RateLimit/RateLimit-Policy fields, the common
// X-RateLimit-* fields, Retry-After, and the 429 body. Runs on the request's
// worker thread; the rule set and store are shared and thread-safe.
#pragma once

#include <string>
#include <vector>

#include "gateway/net.h"
#include "rules/identity.h"
#include "rules/rule_set.h"
#include "store/store.h"

namespace tollgate::gateway {

enum class Verdict { kForward, kDelay, kReject, kUnauthorized };

// A delay rule that limited the request: it waits and is decided again.
struct DelayedHit {
  const rules::RuleHit* hit;  // into the Evaluation passed to DecideLimits
  algorithms::Decision decision;
};

struct LimitOutcome {
  Verdict verdict = Verdict::kForward;
  // The rule whose numbers go into the response headers (the one closest to
  // its limit, or the one that limited), and its decision.
  const rules::RuleConfig* shown = nullptr;
  algorithms::Decision shown_decision;
  std::int64_t delay_ms = 0;        // leaky_bucket shaping: hold the request this long
  std::vector<DelayedHit> delayed;  // kDelay: the delay rules that limited
  std::string log;                  // "rule:decision,..." for the access log
};

struct LimitContext {
  const rules::IdentityResolver& identity;
  const rules::RuleSet& rules;
  store::Store& store;
  std::int64_t now_ms;
};

// Decides every rule that applies. The store must complete inline (the
// local store does); `scratch` is reused between requests.
LimitOutcome DecideLimits(const LimitContext& context, const rules::RequestFacts& request,
                          const rules::Identity& identity, rules::Evaluation& scratch);

// Decides one rule again (a delayed request whose wait is over).
algorithms::Decision DecideAgain(store::Store& store, const rules::RuleHit& hit,
                                 std::int64_t now_ms);

// How long a delayed request waits before it is decided again. For
// fixed_window (one window), the delayed-queue estimate of the spec: with
// `queued` requests of this key already waiting, the request is ready at
// (idx + 1) * W + floor(queued / L) * W, so that waiting requests spread
// over the following windows. Otherwise the decision's retry_after_ms.
std::int64_t DelayFor(const rules::RuleConfig& rule, const algorithms::Decision& decision,
                      std::size_t queued, std::int64_t now_ms);

// Appends the rate-limit fields for `rule`'s decision as header lines
// ("Name: value\r\n"): RateLimit-Policy, RateLimit, X-RateLimit-*.
void AppendRateLimitHeaders(const rules::RuleConfig& rule, const algorithms::Decision& decision,
                            std::string& out);

// Appends the whole answer to a limited request: the rule's status,
// Retry-After, the rate-limit fields and the JSON body
// {"error":"rate_limited","rule":...,"retry_after_ms":...}. Returns the
// body's size.
std::size_t AppendLimitedResponse(const rules::RuleConfig& rule,
                                  const algorithms::Decision& decision, bool keep_alive,
                                  std::string& out);

// Beast's fields as rules::HeaderLookup.
class FieldsLookup final : public rules::HeaderLookup {
 public:
  explicit FieldsLookup(const http::fields& fields) : fields_(fields) {}
  std::string_view Get(std::string_view name) const override;
  std::string GetJoined(std::string_view name) const override;

 private:
  const http::fields& fields_;
};

}  // namespace tollgate::gateway
