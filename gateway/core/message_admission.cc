#include "gateway/core/message_admission.h"

#include <algorithm>
#include <limits>

#include "gateway/core/gateway_state.h"
#include "gateway/telemetry/metrics.h"

namespace tollgate::gateway {

MessageLimiter::MessageLimiter(std::span<const rules::RuleHit> hits, const GatewayState& state,
                               store::Store& store, ThreadMetrics* metrics,
                               const Executor& executor)
    : state_(state),
      metrics_(metrics),
      context_(MakeLimitContext(state_, store, metrics_)),
      timer_(executor) {
  context_.describe = false;  // one log line per tunnel, not per message
  for (const rules::RuleHit& hit : hits) {
    all_.push_back(&hit);
    all_hashes_.push_back(store::KeyHash(hit.key));
  }
  batch_.set_waker(this);
}

Task<MessageVerdict> MessageLimiter::Admit(MessageHold& hold) {
  if (!batch_.done()) {
    co_await AwaitBatch();
    Settle();
  }
  if (outcome_.verdict == Verdict::kDelay) {
    // (GCC 12 miscompiles co_await inside conditions, && and ?: : each
    // is a statement of its own.)
    const bool turn = co_await WaitForTurn(hold, outcome_.delayed);
    if (!turn) co_return MessageVerdict::kRateLimited;
  } else if (const MessageVerdict refused = Refusal(outcome_); refused != MessageVerdict::kPass) {
    co_return refused;
  }
  if (outcome_.delay_ms > 0) {
    co_await hold.Hold(outcome_.delay_ms);
  }
  co_return MessageVerdict::kPass;
}

Task<void> MessageLimiter::AwaitBatch() {
  while (!batch_.done()) {
    timer_.expires_at(Timer::time_point::max());
    co_await timer_.async_wait(kUseTuple);
  }
}

Task<void> MessageLimiter::Decide(const std::vector<const rules::RuleHit*>& hits) {
  Ask(hits);
  if (!batch_.done()) {
    co_await AwaitBatch();
  }
  RecordStore();
}

// Each wait is the longest retry_after among the rules still limiting, and
// the message is refused once the next wait would pass the smallest
// max_delay. Only these rules are decided again: the others counted the
// message already.
Task<bool> MessageLimiter::WaitForTurn(MessageHold& hold, const std::vector<DelayedHit>& delayed) {
  const store::Clock& clock = *state_.clock;
  const std::int64_t start = clock.NowMs();
  std::int64_t deadline = std::numeric_limits<std::int64_t>::max();
  std::int64_t wait = 0;
  again_.clear();
  for (const DelayedHit& d : delayed) {
    deadline = std::min(deadline, start + d.hit->rule->max_delay_ms);
    wait = std::max(wait, d.decision.retry_after_ms);
    again_.push_back(d.hit);
  }
  for (;;) {
    if (clock.NowMs() + wait > deadline) co_return false;
    const bool held = co_await hold.Hold(std::max<std::int64_t>(1, wait));
    if (!held) co_return false;
    co_await Decide(again_);
    wait = 0;
    for (std::size_t i = 0; i < again_.size(); ++i) {
      // The store's decision, or what on_error answered for it.
      const algorithms::Decision& d = batch_.result(i).decision;
      if (!d.allowed) wait = std::max(wait, std::max<std::int64_t>(1, d.retry_after_ms));
    }
    if (wait == 0) co_return true;
  }
}

}  // namespace tollgate::gateway
