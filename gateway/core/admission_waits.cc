// Admission's waits (gateway/core/admission.h): a delayed request's turn
// (WaitForTurn: the delay rules decided again until they allow it, within
// max_delay) and the concurrency rules' places (AcquirePlaces, waiting
// within max_delay). Both wait in the process's WaitingRoom, in a fair
// order, and only the request whose turn it is asks the store. Worker
// thread only.
#include <algorithm>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "gateway/core/admission.h"
#include "gateway/core/gateway_state.h"
#include "gateway/core/timer_waiter.h"
#include "gateway/core/waiting_room.h"
#include "gateway/io/net.h"
#include "gateway/telemetry/metrics.h"
#include "store/coordinator.h"
#include "store/store.h"

namespace tollgate::gateway {

namespace {

using RoomWaiter = TimerWaiter<WaitingRoom::Waiter>;

// Out of the room on every path, also when the coroutine is destroyed
// while it waits (shutdown): the turn goes to the next in line.
class Leaving {
 public:
  Leaving(WaitingRoom& room, const std::shared_ptr<RoomWaiter>& waiter)
      : room_(room), waiter_(waiter) {}
  Leaving(const Leaving&) = delete;
  Leaving& operator=(const Leaving&) = delete;
  ~Leaving() { room_.Done(*waiter_); }

 private:
  WaitingRoom& room_;
  const std::shared_ptr<RoomWaiter>& waiter_;
};

// A rule's line: max_waiting, and per flow max_waiting_per_flow (if set).
WaitingRoom::Bounds BoundsOf(const rules::RuleConfig& rule) {
  const std::int64_t per_flow =
      rule.max_waiting_per_flow > 0 ? rule.max_waiting_per_flow : rule.max_waiting;
  return {.max_per_key = static_cast<std::size_t>(rule.max_waiting),
          .max_per_flow = static_cast<std::size_t>(per_flow)};
}

// Waits `ms` (none when ms <= 0) on `timer`, which a turn's notice ends
// early, watching the client. False when the client left: `ex` then says
// so (it closes, error client_gone).
Task<bool> HoldFor(ClientWatch& client, Timer& timer, std::int64_t ms, Exchange& ex) {
  timer.expires_after(Ms(std::max<std::int64_t>(0, ms)));
  const ClientWatch::Held held = co_await client.Hold(timer);
  if (held == ClientWatch::Held::kElapsed) co_return true;
  ex.close = true;
  ex.error = "client_gone";
  co_return false;
}

// The rule whose numbers the refusal of a delayed request shows.
void ShowRefusal(LimitOutcome& outcome, const DelayedHit& d) {
  outcome.shown = d.rule;
  outcome.shown_decision = d.decision;
}

}  // namespace

WaitClass Admission::ClassOf(const rules::RuleHit* hit) const {
  WaitClass c = wait_class_;
  if (hit != nullptr && hit->flow != 0) c.flow = hit->flow;
  c.priority = evaluation_.priority.value_or(wait_class_.priority);
  return c;
}

Task<Admission::Place> Admission::AcquirePlaces(const GatewayState& state,
                                                const LimitContext& context, ClientWatch& client,
                                                Exchange& ex, const rules::RuleConfig*& refused) {
  LimitOutcome& outcome = ex.limits;
  const store::Clock& clock = *state.clock;
  // Places given back by other gateways (Redis) wake nobody here: the
  // request whose turn it is asks again now and then.
  const bool shared = state.config->store.kind == rules::StoreKind::kRedis;
  for (const rules::RuleHit& hit : evaluation_.inflight) {
    const rules::RuleConfig& rule = *hit.rule;
    WaitingRoom* const room = rule.max_delay_ms > 0 ? state.waiting_room : nullptr;
    const std::int64_t deadline = clock.NowMs() + rule.max_delay_ms;
    std::shared_ptr<RoomWaiter> waiter;
    std::optional<Leaving> leaving;
    std::optional<GaugeScope> gauge;  // tollgate_delayed_requests while it waits
    int polls = 0;
    // Others already wait for this key: behind them, not before.
    bool try_now = room == nullptr || room->waiting(hit.key) == 0;
    for (;;) {
      if (try_now) {
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
          outcome.inflight.emplace_back(std::move(place), room, hit.key);
          break;  // Leaving passes the turn on: the next may find a place too
        }
      }
      WaitingRoom::Status status = WaitingRoom::Status::kOut;
      if (room != nullptr && !waiter) {
        const Executor executor = co_await asio::this_coro::executor;
        waiter = std::make_shared<RoomWaiter>(executor);
        waiter->Classify(ClassOf(&hit));
        const WaitingRoom::Entered entered = room->Enter(hit.key, BoundsOf(rule), *waiter);
        if (entered != WaitingRoom::Entered::kRefused) {
          leaving.emplace(*room, waiter);
          gauge.emplace(services_.metrics, &ThreadMetrics::AddDelayed);
          // The turn at once: the line emptied since the try, and a place
          // given back meanwhile woke nobody. Try again before sleeping.
          if (entered == WaitingRoom::Entered::kTurn) {
            try_now = true;
            continue;
          }
        }
      }
      if (waiter) status = room->StatusOf(*waiter);
      const std::int64_t now = clock.NowMs();
      if (status == WaitingRoom::Status::kOut || status == WaitingRoom::Status::kShed ||
          now >= deadline) {
        NoteInflight(context, hit, false, outcome);
        outcome.inflight.clear();  // the places already taken go back at once
        refused = &rule;
        co_return Place::kRefused;
      }
      // The turn, and a place was given back since the last try: try now.
      if (status == WaitingRoom::Status::kTurn && room->TakeWake(*waiter)) {
        try_now = true;
        polls = 0;
        continue;
      }
      std::int64_t sleep = deadline - now;
      if (status == WaitingRoom::Status::kTurn && shared) {
        sleep = std::min<std::int64_t>(sleep, std::int64_t{1} << std::min(polls++, 5));
      }
      // (GCC 12 miscompiles co_await inside a condition: a statement.)
      const bool stayed = co_await HoldFor(client, waiter->timer, sleep, ex);
      if (!stayed) {
        outcome.inflight.clear();
        co_return Place::kClientGone;
      }
      // Woken: its turn came, a place was given back, or a poll is due.
      try_now = room->StatusOf(*waiter) == WaitingRoom::Status::kTurn;
      if (try_now && room->TakeWake(*waiter)) polls = 0;
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
  for (const DelayedHit& d : outcome.delayed) {
    deadline = std::min(deadline, start + d.rule->max_delay_ms);
  }
  // The request waits in the line of its first delaying rule: the turns
  // are taken there, fairly between flows. The others' lines bound it too
  // (their max_waiting), without a place in them.
  const DelayedHit& first = outcome.delayed.front();
  for (const DelayedHit& d : outcome.delayed) {
    if (&d != &first &&
        state.waiting_room->waiting(d.hit->key) >= static_cast<std::size_t>(d.rule->max_waiting)) {
      ex.error = "waiting_room_full";
      ShowRefusal(outcome, d);
      co_return Turn::kRejected;
    }
  }
  const Executor executor = co_await asio::this_coro::executor;
  std::shared_ptr<RoomWaiter> waiter = std::make_shared<RoomWaiter>(executor);
  waiter->Classify(ClassOf(first.hit));
  std::size_t ahead = 0;
  const WaitingRoom::Entered entered =
      state.waiting_room->Enter(first.hit->key, BoundsOf(*first.rule), *waiter, &ahead);
  if (entered == WaitingRoom::Entered::kRefused) {
    ex.error = "waiting_room_full";
    ShowRefusal(outcome, first);
    co_return Turn::kRejected;
  }
  const Leaving leaving{*state.waiting_room, waiter};
  const std::size_t in_line = state.waiting_room->waiting(first.hit->key);
  // Places in each key's waiting line, held until this function returns
  // (shared with other gateways on Redis: it spreads their waiting
  // requests over later windows too).
  std::vector<store::InflightGuard> lines(outcome.delayed.size());
  std::int64_t wait = 0;
  for (std::size_t i = 0; i < outcome.delayed.size(); ++i) {
    const DelayedHit& d = outcome.delayed[i];
    const store::CountResult queued =
        co_await Coordinate([&](store::Coordinator& c, store::CountSink& sink) {
          c.EnterQueue(d.hit->key, d.rule->max_delay_ms + 1000, lines[i], sink);
        });
    // Ahead of it: those of this process's line that go before it in the
    // fair order, and those of other gateways (the shared line's count
    // beyond this process's); without an answer, this process's own.
    const std::size_t shared_line =
        queued.status == store::StoreStatus::kOk
            ? static_cast<std::size_t>(std::max<std::int64_t>(0, queued.value))
        : i == 0 ? in_line - 1
                 : state.waiting_room->waiting(d.hit->key);
    const std::size_t before =
        i == 0 ? ahead + (shared_line + 1 > in_line ? shared_line + 1 - in_line : 0) : shared_line;
    wait = std::max(wait, DelayFor(*d.rule, d.decision, before, start));
  }
  if (clock.NowMs() + wait > deadline) {
    ShowRefusal(outcome, first);
    co_return Turn::kRejected;
  }
  if (entered == WaitingRoom::Entered::kQueued) {
    // Until the request before it is let through (or gives up). The state
    // first: the turn may have come during the store calls above.
    for (;;) {
      const WaitingRoom::Status status = state.waiting_room->StatusOf(*waiter);
      if (status == WaitingRoom::Status::kTurn) break;
      if (status == WaitingRoom::Status::kShed || clock.NowMs() >= deadline) {
        if (status == WaitingRoom::Status::kShed) ex.error = "waiting_room_full";
        ShowRefusal(outcome, first);
        co_return Turn::kRejected;
      }
      const bool stayed = co_await HoldFor(client, waiter->timer, deadline - clock.NowMs(), ex);
      if (!stayed) co_return Turn::kClientGone;
    }
    wait = 0;  // the one before was just let through: ask now
  }
  for (;;) {
    if (clock.NowMs() + wait > deadline) {
      ShowRefusal(outcome, first);
      co_return Turn::kRejected;
    }
    if (wait > 0) {
      // Waiting also watches the client: one that leaves gives its turn
      // back at once.
      const bool stayed = co_await HoldFor(client, waiter->timer, wait, ex);
      if (!stayed) co_return Turn::kClientGone;
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
