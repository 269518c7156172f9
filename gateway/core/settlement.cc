#include "gateway/core/settlement.h"

#include "gateway/core/admission.h"
#include "gateway/core/gateway_state.h"
#include "gateway/core/limits.h"
#include "gateway/core/request_cost.h"
#include "gateway/telemetry/metrics.h"
#include "rules/config.h"
#include "store/store.h"

namespace tollgate::gateway {
namespace {

// Hears a settle's answer, which may come after the exchange has ended
// (Redis): it owns itself and goes when answered, which every store does
// within its deadline.
class SettleSink final : public store::DecisionSink {
 public:
  SettleSink(ThreadMetrics* metrics, int rule, std::int64_t reserved, std::int64_t actual)
      : metrics_(metrics), rule_(rule), reserved_(reserved), actual_(actual) {}
  void OnDecision(const store::StoreResult& result) override {
    if (metrics_ != nullptr && result.status == store::StoreStatus::kOk) {
      metrics_->RecordCost(rule_, CostPhase::kSettled, actual_);
      if (actual_ < reserved_) metrics_->RecordCost(rule_, CostPhase::kRefunded, reserved_ - actual_);
    }
    delete this;
  }

 private:
  ThreadMetrics* const metrics_;
  const int rule_;
  const std::int64_t reserved_;
  const std::int64_t actual_;
};

// The metrics' id of the rule that made `r`.
int MetricRuleOf(const GatewayState& state, const Reservation& r) {
  return state.rule_ids[r.rule - state.config->rules.data()];
}

// Counts `r` as reserved (tollgate_ratelimit_cost_total, phase "reserved").
void RecordReserved(const GatewayState& state, const CoreServices& services,
                    const Reservation& r) {
  if (services.metrics != nullptr) {
    services.metrics->RecordCost(MetricRuleOf(state, r), CostPhase::kReserved, r.cost);
  }
}

// Settles reservation `r` of `ex` to `actual` on the store it was made on.
void SettleReservation(const GatewayState& state, const CoreServices& services,
                       const LimitContext& context, Exchange& ex, const Reservation& r,
                       std::int64_t actual) {
  if (&r == &ex.limits.reserved.front()) ex.cost_settled = actual;
  store::SettleRequest settle;
  settle.reservation = {r.key, r.decided_by->limit.get(), r.cost, r.now_ms, r.partition,
                        r.key_hash};
  settle.actual = actual;
  // On the clock the reservation was made on (limits.cc, DecisionBatch).
  settle.now_ms = r.decided_by->limit->calendar ? context.unix_ms : context.store_now_ms;
  settle.reserved_by = r.source;
  const int rule = services.metrics != nullptr ? MetricRuleOf(state, r) : 0;
  services.store->Settle(settle, *new SettleSink(services.metrics, rule, r.cost, actual));
}

}  // namespace

void RefundReservations(const GatewayState& state, const CoreServices& services, Exchange& ex,
                        Reserved reserved) {
  if (ex.limits.reserved.empty()) return;
  const LimitContext context = MakeLimitContext(state, *services.store, services.metrics);
  for (const Reservation& r : ex.limits.reserved) {
    if (reserved == Reserved::kCount) RecordReserved(state, services, r);
    SettleReservation(state, services, context, ex, r, 0);
  }
  ex.cost_reserved = ex.limits.reserved.front().cost;
}

void Settlement::Arm(const GatewayState& state, Exchange& ex, std::string_view model) {
  state_ = &state;
  ex_ = &ex;
  model_.assign(model);
  response_bytes_ = 0;
  const std::vector<Reservation>& reserved = ex.limits.reserved;
  watches_.resize(reserved.size());
  for (std::size_t i = 0; i < reserved.size(); ++i) {
    Watch& w = watches_[i];
    w.reservation = i;
    w.from_header.reset();
    w.scanning = false;
    const rules::RuleBudget& budget = reserved[i].decided_by->budget;
    if (w.kind != budget.settle || w.api != budget.cost || w.json_path != budget.settle_json) {
      w.kind = budget.settle;
      w.api = budget.cost;
      w.json_path = budget.settle_json;
      w.scanner.reset();  // it refers to the paths
      w.paths = budget.settle == rules::SettleKind::kJson ? budget::SinglePath(budget.settle_json)
                                                          : budget::UsagePaths{};
    }
    if (state.reservations != nullptr) state.reservations->Add(reserved[i].key, reserved[i].cost);
    RecordReserved(state, services_, reserved[i]);
  }
  ex.cost_reserved = reserved.front().cost;
  ex.body_observer = this;
}

void Settlement::Unledger() {
  if (state_->reservations != nullptr) {
    for (const Reservation& r : ex_->limits.reserved) state_->reservations->Remove(r.key, r.cost);
  }
  ex_ = nullptr;
}

void Settlement::OnResponseHead(unsigned, const ResponseFields& fields) {
  const budget::BodyFormat format = budget::BodyFormatOf(fields.Get("Content-Type"));
  for (Watch& w : watches_) {
    const rules::RuleBudget& budget = ex_->limits.reserved[w.reservation].decided_by->budget;
    switch (budget.settle) {
      case rules::SettleKind::kHeader: {
        const std::int64_t n = CostFromHeader(fields.Get(budget.settle_header), -1);
        if (n >= 0) w.from_header = n;
        break;
      }
      case rules::SettleKind::kJson:
      case rules::SettleKind::kUsage:
        // The scanner is made ready with the first piece of the body, once
        // the head is on its way to the client.
        w.format = format;
        w.scanning = true;
        w.fed = false;
        break;
      case rules::SettleKind::kResponseBytes:
      case rules::SettleKind::kNone:
        break;
    }
  }
}

void Settlement::OnResponseBody(std::string_view piece) {
  response_bytes_ += piece.size();
  for (Watch& w : watches_) {
    if (!w.scanning) continue;
    if (!w.fed) Ready(w);
    w.scanner->Feed(piece);
  }
}

void Settlement::Ready(Watch& w) {
  w.fed = true;
  if (w.scanner && w.scanner->format() == w.format) {
    w.scanner->Reset();
  } else if (w.kind == rules::SettleKind::kJson) {
    w.scanner.emplace(w.paths, w.format);
  } else {
    w.scanner.emplace(budget::UsagePathsOf(LlmApiOf(w.api)), w.format);
  }
}

std::optional<std::int64_t> Settlement::Actual(const Watch& w) const {
  const Reservation& r = ex_->limits.reserved[w.reservation];
  const rules::RuleBudget& budget = r.decided_by->budget;
  switch (budget.settle) {
    case rules::SettleKind::kNone:
      return std::nullopt;
    case rules::SettleKind::kHeader:
      return w.from_header;
    case rules::SettleKind::kResponseBytes:
      return static_cast<std::int64_t>(response_bytes_);
    case rules::SettleKind::kJson:
      if (!w.scanning) return std::nullopt;
      return w.scanner->usage().total;
    case rules::SettleKind::kUsage:
      break;
  }
  if (!w.scanning) return std::nullopt;
  const budget::Usage usage = w.scanner->usage();
  switch (budget.tokens) {
    case rules::TokenCount::kTotal:
      return usage.Count(budget::TokenCount::kTotal);
    case rules::TokenCount::kInput:
      return usage.Count(budget::TokenCount::kInput);
    case rules::TokenCount::kOutput:
      return usage.Count(budget::TokenCount::kOutput);
    case rules::TokenCount::kPrice:
      break;
  }
  const rules::ModelPrice* price = PriceOf(state_->config->prices, model_);
  if (price == nullptr || !usage.input || !usage.output) return std::nullopt;
  return PricedCost(*price, *usage.input, *usage.output);
}

void Settlement::OnResponseEnd() {
  ex_->body_observer = nullptr;
  const LimitContext context = MakeLimitContext(*state_, *services_.store, services_.metrics);
  for (Watch& w : watches_) {
    if (w.scanning && !w.fed) Ready(w);  // an empty body
    if (w.scanning) w.scanner->Finish();
    const std::optional<std::int64_t> actual = Actual(w);
    if (!actual) continue;
    SettleReservation(*state_, services_, context, *ex_, ex_->limits.reserved[w.reservation],
                      *actual);
  }
  Unledger();
}

std::unique_ptr<Settlement> SettlementPool::Take(const CoreServices& services) {
  if (kept_.empty()) return std::make_unique<Settlement>(services);
  std::unique_ptr<Settlement> settlement = std::move(kept_.back());
  kept_.pop_back();
  return settlement;
}

void SettlementPool::Give(std::unique_ptr<Settlement> settlement) {
  if (kept_.size() < kKept) kept_.push_back(std::move(settlement));
}

}  // namespace tollgate::gateway
