// Phase admit for WebSocket messages: the per = "message" rules of a
// tunnel decide each data message from the client before its first byte
// goes on, through the worker's store, as Admission decides a request's
// rate rules (gateway/core/limits.h). A message that delay rules do not
// allow yet is held, the client unread meanwhile, through the tunnel's
// MessageHold. Heavy (Asio): include only from gateway implementation
// files. One MessageLimiter per tunnel; worker thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "gateway/core/admission.h"
#include "gateway/core/limits.h"
#include "gateway/io/io_types.h"
#include "gateway/telemetry/metrics.h"
#include "rules/rule_set.h"
#include "base/loop_time.h"
#include "store/store.h"

namespace tollgate::gateway {

struct GatewayState;

// What becomes of a message: it goes on, or the tunnel ends because a rule
// limited it or the store could not decide (on_error = "deny").
enum class MessageVerdict { kPass, kRateLimited, kStoreUnavailable };

// Where a held message waits: the tunnel, which stops reading the client
// meanwhile and ends the wait when it ends.
class MessageHold {
 public:
  // Sleeps `ms`; false when the tunnel ended meanwhile.
  virtual Task<bool> Hold(std::int64_t ms) = 0;

 protected:
  ~MessageHold() = default;
};

class MessageLimiter final : public BatchWaker {
 public:
  // `hits`: the rules and their keys as the handshake's evaluation found
  // them; `state` the configuration it was served under; `store` the
  // worker's; `metrics` null when metrics are off. All outlive the limiter.
  MessageLimiter(std::span<const rules::RuleHit> hits, const GatewayState& state,
                 store::Store& store, ThreadMetrics* metrics, const Executor& executor);
  MessageLimiter(const MessageLimiter&) = delete;
  MessageLimiter& operator=(const MessageLimiter&) = delete;

  // Starts deciding the message about to start. True when that is all (the
  // store answered inline and the message needs no wait, the usual case
  // with the local store: no coroutine): `verdict` is the decision. False:
  // Admit() finishes the decision.
  bool AdmitNow(MessageVerdict& verdict) {
    Ask(all_, all_hashes_);
    if (!batch_.done()) return false;
    Settle();
    if (outcome_.verdict == Verdict::kDelay || outcome_.delay_ms > 0) return false;
    verdict = Refusal(outcome_);
    return true;
  }

  // What AdmitNow left: the store's answer, any wait the message has to
  // make in `hold`, and the decision after it.
  Task<MessageVerdict> Admit(MessageHold& hold);

 private:
  void Wake() override { timer_.cancel(); }

  static MessageVerdict Refusal(const LimitOutcome& outcome) {
    if (outcome.verdict == Verdict::kStoreUnavailable) return MessageVerdict::kStoreUnavailable;
    if (outcome.verdict == Verdict::kReject) return MessageVerdict::kRateLimited;
    return MessageVerdict::kPass;
  }

  // Asks the store about `hits` (`key_hashes`: their keys' hashes, or
  // empty); the answers may come inline.
  void Ask(const std::vector<const rules::RuleHit*>& hits,
           std::span<const std::uint64_t> key_hashes = {}) {
    RestampLimitContext(state_, context_);
    asked_ = store::LoopNow();
    batch_.Start(context_, hits, 0, key_hashes);
  }

  void RecordStore() {
    if (metrics_ != nullptr) {
      metrics_->RecordStore(context_.store_kind,
                            std::chrono::duration<double>(store::LoopNow() - asked_).count());
    }
  }

  // The batch of all the rules is done: what it means for the message.
  void Settle() {
    RecordStore();
    FinishLimits(context_, all_, batch_, outcome_);
  }

  // Awaits every answer Ask() did not get inline. Never cut short: the
  // store writes into the batch until then.
  Task<void> AwaitBatch();
  // Asks about `hits` and awaits every answer.
  Task<void> Decide(const std::vector<const rules::RuleHit*>& hits);
  // Until the delay rules that limited the message allow it (see the .cc).
  Task<bool> WaitForTurn(MessageHold& hold, const std::vector<DelayedHit>& delayed);

  const GatewayState& state_;
  ThreadMetrics* metrics_;  // null: metrics are off
  // Made once, its clocks and overrides current again for each Ask, rather
  // than built per message.
  LimitContext context_;
  std::chrono::steady_clock::time_point asked_;  // when
  LimitOutcome outcome_;                         // the message's, once all_ are decided
  std::vector<const rules::RuleHit*> all_;
  // store::KeyHash of all_'s keys: a tunnel's keys never change, so they
  // are hashed once, not per message.
  std::vector<std::uint64_t> all_hashes_;
  std::vector<const rules::RuleHit*> again_;  // the delay rules still limiting
  DecisionBatch batch_;
  Timer timer_;  // woken by the batch's last answer
};

}  // namespace tollgate::gateway
