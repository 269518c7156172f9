// Admission's waits (gateway/core/admission.h): a delayed request's turn
// (WaitForTurn: the delay rules decided again until they allow it, within
// max_delay and the waiting room's bounds) and the concurrency rules'
// places (AcquirePlaces, retrying within max_delay). Worker thread only.
#include <algorithm>
#include <limits>
#include <optional>
#include <string>

#include "gateway/core/admission.h"
#include "gateway/core/gateway_state.h"
#include "gateway/telemetry/metrics.h"
#include "store/coordinator.h"
#include "store/store.h"

namespace tollgate::gateway {

struct Admission::PlaceWait {
  std::string key;  // in the waiting room
  std::size_t max_waiting = 0;
  std::int64_t delay_ms = 0;  // 0: refused at once
  std::int64_t deadline_ms = 0;
  int attempt = 0;
  std::optional<WaitingRoom::Ticket> ticket = std::nullopt;
  std::optional<GaugeScope> gauge = std::nullopt;
};

Task<bool> Admission::WaitForPlace(const GatewayState& state, PlaceWait& wait) {
  if (!wait.ticket) {
    if (wait.delay_ms <= 0) co_return false;
    std::size_t before = 0;
    wait.ticket = state.waiting_room->Enter(wait.key, wait.max_waiting, before);
    if (!wait.ticket) co_return false;
    wait.gauge.emplace(services_.metrics, &ThreadMetrics::AddDelayed);
  }
  const std::int64_t left = wait.deadline_ms - state.clock->NowMs();
  if (left <= 0) co_return false;
  const Executor executor = co_await asio::this_coro::executor;
  Timer timer(executor,
              Ms(std::min<std::int64_t>(left, std::int64_t{1} << std::min(wait.attempt, 5))));
  ++wait.attempt;
  co_await timer.async_wait(kUseTuple);
  co_return true;
}

Task<Admission::Place> Admission::AcquirePlaces(const GatewayState& state,
                                                const LimitContext& context, Exchange& ex,
                                                const rules::RuleConfig*& refused) {
  LimitOutcome& outcome = ex.limits;
  for (const rules::RuleHit& hit : evaluation_.inflight) {
    const rules::RuleConfig& rule = *hit.rule;
    PlaceWait wait{hit.key, static_cast<std::size_t>(rule.max_waiting), rule.max_delay_ms,
                   state.clock->NowMs() + rule.max_delay_ms};
    for (;;) {
      store::InflightGuard place;
      const store::CountResult got =
          co_await Coordinate([&](store::Coordinator& c, store::CountSink& sink) {
            c.AcquirePlace(hit.key, rule.max_inflight, context.store_now_ms, place, sink);
          });
      if (got.status != store::StoreStatus::kOk) {
        if (got.source == store::ResultSource::kPolicyDenied) {
          outcome.inflight.clear();
          co_return Place::kStoreDown;
        }
        NoteInflight(context, hit, true, outcome);  // on_error = "allow": no place to count
        break;
      }
      if (got.value == 1) {
        NoteInflight(context, hit, true, outcome);
        outcome.inflight.push_back(std::move(place));
        break;
      }
      const bool again = co_await WaitForPlace(state, wait);
      if (!again) {
        NoteInflight(context, hit, false, outcome);
        outcome.inflight.clear();  // the places already taken go back at once
        refused = &rule;
        co_return Place::kRefused;
      }
    }
  }
  co_return Place::kAdmitted;
}

Task<Admission::Turn> Admission::WaitForTurn(const GatewayState& state, ClientWatch& client,
                                             Exchange& ex) {
  LimitOutcome& outcome = ex.limits;
  const store::Clock& clock = *state.clock;
  const std::int64_t start = clock.NowMs();
  std::int64_t deadline = std::numeric_limits<std::int64_t>::max();
  std::int64_t wait = 0;
  // Places held until this function returns: in this process's waiting room
  // (its bound) and in the key's waiting line (shared with other gateways
  // on Redis: it spreads their waiting requests over later windows too).
  std::vector<WaitingRoom::Ticket> tickets;
  std::vector<store::InflightGuard> lines(outcome.delayed.size());
  for (std::size_t i = 0; i < outcome.delayed.size(); ++i) {
    const DelayedHit& d = outcome.delayed[i];
    const rules::RuleConfig& rule = *d.rule;
    deadline = std::min(deadline, start + rule.max_delay_ms);
    std::size_t local_queued = 0;
    std::optional<WaitingRoom::Ticket> ticket = state.waiting_room->Enter(
        d.hit->key, static_cast<std::size_t>(rule.max_waiting), local_queued);
    if (!ticket) {
      ex.error = "waiting_room_full";
      outcome.shown = &rule;
      outcome.shown_decision = d.decision;
      co_return Turn::kRejected;
    }
    tickets.push_back(std::move(*ticket));
    const store::CountResult queued =
        co_await Coordinate([&](store::Coordinator& c, store::CountSink& sink) {
          c.EnterQueue(d.hit->key, rule.max_delay_ms + 1000, lines[i], sink);
        });
    // Without an answer, this process's own count is the estimate.
    const std::size_t before =
        queued.status == store::StoreStatus::kOk
            ? static_cast<std::size_t>(std::max<std::int64_t>(0, queued.value))
            : local_queued;
    wait = std::max(wait, DelayFor(rule, d.decision, before, start));
  }
  for (;;) {
    if (clock.NowMs() + wait > deadline) {
      outcome.shown = outcome.delayed.front().rule;
      outcome.shown_decision = outcome.delayed.front().decision;
      co_return Turn::kRejected;
    }
    // Waiting also watches the client: one that leaves gives its place
    // back at once.
    const ClientWatch::Held held = co_await client.Hold(Ms(wait));
    if (held == ClientWatch::Held::kClientGone) {
      ex.close = true;
      ex.error = "client_gone";
      co_return Turn::kClientGone;
    }
    bool allowed = true;
    wait = 0;
    // Only the delaying rules are decided again: the others already counted.
    hits_.clear();
    for (const DelayedHit& d : outcome.delayed) hits_.push_back(d.hit);
    const LimitContext context = MakeLimitContext(state, *services_.store, services_.metrics);
    batch_.Start(context, hits_, 0, {}, descriptor_limit_ ? &*descriptor_limit_ : nullptr);
    if (!batch_.done()) co_await WaitForBatch();
    for (std::size_t i = 0; i < outcome.delayed.size(); ++i) {
      DelayedHit& d = outcome.delayed[i];
      // The store's decision, or what on_error answered for it.
      d.decision = batch_.result(i).decision;
      if (!d.decision.allowed) {
        allowed = false;
        wait = std::max(wait, std::max<std::int64_t>(1, d.decision.retry_after_ms));
      }
    }
    if (allowed) {
      for (std::size_t i = 0; i < outcome.delayed.size(); ++i) {
        NoteReservation(*hits_[i], batch_, i, outcome);
      }
      co_return Turn::kReady;
    }
  }
}

}  // namespace tollgate::gateway
