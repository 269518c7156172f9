// Phase respond, for rate rules that settle (rules/budget.h): watches an
// admitted request's response for what it really cost — a header
// (settle = { header }), a number in a JSON body or in the `data:` events
// of a text/event-stream (settle = { json }), the body's size
// (settle = "response_bytes"), or an LLM preset's usage — while the body
// streams past (nothing is held back), and when the response has ended
// settles each reservation to that cost in one step on the store it was
// reserved on (store::Store::Settle). A response that never says (cut
// off, no such field, a count the upstream left out) keeps its
// reservation. Worker thread only; an Admission takes one from its
// thread's SettlementPool for an exchange that settles and gives it back
// when the exchange ends.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/budget/usage.h"
#include "gateway/core/exchange.h"
#include "gateway/core/response_observer.h"
#include "gateway/core/services.h"
#include "rules/budget.h"

namespace tollgate::gateway {

struct GatewayState;

class Settlement final : public ResponseBodyObserver {
 public:
  explicit Settlement(const CoreServices& services) : services_(services) {}
  Settlement(const Settlement&) = delete;
  Settlement& operator=(const Settlement&) = delete;

  // Watches the response of `ex` for its reservations (ex.limits.reserved,
  // not empty) and becomes ex.body_observer. `model`: the LLM request's
  // model ("" when none), which per-model prices settle by. `state` and
  // `ex` outlive the response.
  void Arm(const GatewayState& state, Exchange& ex, std::string_view model);

  // The exchange has ended: its reservations are no longer in flight
  // (GatewayState::reservations), settled or not. Nothing when not armed.
  void Disarm() {
    if (ex_ != nullptr) Unledger();
  }

  void OnResponseHead(unsigned status, const ResponseFields& fields) override;
  void OnResponseBody(std::string_view piece) override;
  void OnResponseEnd() override;

 private:
  // One reservation's way to its settled cost. Kept from one exchange to
  // the next: a scanner for the same source is reset, not made anew.
  struct Watch {
    std::size_t reservation = 0;  // index in ex.limits.reserved
    // What `paths` and `scanner` read: the rule's settle kind, its JSON
    // path or the preset's API (a key by value: a rule's address may be
    // another rule's after a reload).
    rules::SettleKind kind = rules::SettleKind::kNone;
    rules::CostKind api = rules::CostKind::kFixed;
    std::string json_path;
    budget::UsagePaths paths;  // settle = { json }: its one path
    std::optional<budget::UsageScanner> scanner;
    budget::BodyFormat format = budget::BodyFormat::kJson;  // this response's
    bool scanning = false;  // `scanner` reads this exchange's response
    bool fed = false;       // Ready() has made it ready for this response
    std::optional<std::int64_t> from_header;
  };
  void Unledger();
  // Makes `w.scanner` ready for this response's body (reset, or made for
  // its format).
  void Ready(Watch& w);
  // What the response says the reservation cost, if it says.
  std::optional<std::int64_t> Actual(const Watch& watch) const;

  const CoreServices& services_;
  const GatewayState* state_ = nullptr;
  Exchange* ex_ = nullptr;  // while armed
  std::string model_;
  // A deque: growing it for an exchange with more reservations than the
  // last keeps every Watch where it is (a scanner refers to its paths).
  std::deque<Watch> watches_;
  std::uint64_t response_bytes_ = 0;
};

// Whether a request's reservations were counted as reserved already: the
// response was watched for them (Settlement::Arm counts them).
enum class Reserved { kCount, kCounted };

// The request of `ex`, admitted, never reached the upstream (tollgate
// refused it on the way, its body failed, or no connection to the upstream
// could be made): each of its reservations settles to 0, as a response
// that said it cost nothing would, counted as reserved first unless
// `reserved` says they were. Nothing when it reserved nothing.
void RefundReservations(const GatewayState& state, const CoreServices& services, Exchange& ex,
                        Reserved reserved = Reserved::kCount);

// The settlements of one worker thread that no exchange uses, with their
// scanners ready, so that a connection's first exchange that settles does
// not make them anew. Keeps at most kKept. Worker thread only.
class SettlementPool {
 public:
  static constexpr std::size_t kKept = 64;

  // A settlement for `services` (the thread's): a kept one, or a new one.
  std::unique_ptr<Settlement> Take(const CoreServices& services);
  // `settlement`, disarmed, for a later Take().
  void Give(std::unique_ptr<Settlement> settlement);

 private:
  std::vector<std::unique_ptr<Settlement>> kept_;
};

}  // namespace tollgate::gateway
