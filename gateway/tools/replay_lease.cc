// `tollgate replay --sync lease --gateways N`: a fleet of N gateways
// deciding a trace from leases, next to one exact store.
#include "gateway/tools/replay_lease.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <istream>
#include <map>
#include <ostream>
#include <queue>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "algorithms/lease.h"
#include "algorithms/validate.h"
#include "gateway/tools/trace_line.h"
#include "store/lease_hand.h"
#include "store/local_store.h"

namespace tollgate::gateway {
namespace {

// The shared state (what Redis holds) and the fleet's hands, on the
// trace's clock. Takes and returns reach the shared state at the moment
// they are made: the fleet without network latency.
class Fleet final : private store::LeaseHand::Releases {
 public:
  Fleet(const ReplayOptions& options, std::int64_t gateways)
      : windows_(options.windows),
        ttl_ms_(options.lease->ttl_ms),
        max_units_(options.lease->max_units),
        refill_(algorithms::HasBucketLease(windows_) ? store::LeaseRefill::kHeldBack
                                                     : store::LeaseRefill::kFree),
        stamps_(algorithms::HasLogLease(windows_) ? store::LeaseStamps::kKept
                                                  : store::LeaseStamps::kNone),
        hands_(static_cast<std::size_t>(gateways)) {}

  // Gateway `g`'s decision of `cost` units of `key` at `now`.
  bool Decide(std::int64_t g, const std::string& key, std::int64_t cost, std::int64_t now) {
    Expire(now);
    store::LeaseHand& hand = Hand(g, key, now);
    current_ = &State(key, now);
    algorithms::Decision d;
    if (hand.Spend(cost, now, d, *this)) {
      if (hand.WantsRenewal(now)) Take(g, key, hand, now, 1);
      return true;
    }
    if (hand.Blocked(now)) return false;
    if (hand.SpendsTake(now, cost, max_units_)) {
      // A cold key's take, spent at once by this request (LeasingStore).
      ++takes_;
      const algorithms::LeaseGrant grant =
          current_->Take(now, cost, ttl_ms_, ttl_ms_ + store::kDefaultLeaseGraceMs,
                         algorithms::TakeUse::kSpent);
      if (grant.units > 0) {
        hand.NoteSpent(now, cost);
        return true;
      }
      hand.Block(now, grant.retry_after_ms);
      return false;
    }
    // Short of units: takes until the hand holds the cost or the budget
    // is spent, as the gateway's waiting request would.
    while (!hand.Blocked(now)) {
      Take(g, key, hand, now, cost - hand.in_hand());
      if (hand.Spend(cost, now, d, *this)) {
        if (hand.WantsRenewal(now)) Take(g, key, hand, now, 1);
        return true;
      }
    }
    return false;
  }

  std::int64_t takes() const { return takes_; }

 private:
  using Due = std::tuple<std::int64_t, std::int64_t, std::string>;  // end, gateway, key

  store::LeaseHand& Hand(std::int64_t g, const std::string& key, std::int64_t now) {
    auto& hands = hands_[static_cast<std::size_t>(g)];
    auto it = hands.find(key);
    if (it == hands.end()) it = hands.try_emplace(key, now, ttl_ms_, refill_, stamps_).first;
    return it->second;
  }

  algorithms::LeaseState& State(const std::string& key, std::int64_t now) {
    auto it = states_.find(key);
    if (it == states_.end()) it = states_.try_emplace(key, windows_, now).first;
    return it->second;
  }

  void Take(std::int64_t g, const std::string& key, store::LeaseHand& hand, std::int64_t now,
            std::int64_t need) {
    ++takes_;
    const algorithms::LeaseGrant grant = current_->Take(
        now, hand.Want(now, need, max_units_), ttl_ms_, ttl_ms_ + store::kDefaultLeaseGraceMs);
    if (grant.units <= 0) {
      hand.Block(now, grant.retry_after_ms);
      return;
    }
    due_.emplace(hand.Add(now, grant.units, grant.valid_ms, grant.stamps), g, key);
  }

  // Every lease that ended by `now`, in any hand, goes back at its end, as
  // each gateway's timer gives them back (ends come in time order, none
  // before the previous row).
  void Expire(std::int64_t now) {
    while (!due_.empty() && std::get<0>(due_.top()) <= now) {
      const auto [end, g, key] = due_.top();
      due_.pop();
      current_ = &State(key, end);
      Hand(g, key, end).Expire(end, *this);
    }
  }

  void OnRelease(const store::LeaseHand::Held& held, store::LeaseEnd end,
                 std::int64_t now) override {
    if (end == store::LeaseEnd::kReturn)
      current_->Return(now, held.stamps, held.used, held.left, held.used_at);
  }

  std::vector<algorithms::LimitParams> windows_;
  std::int64_t ttl_ms_;
  std::int64_t max_units_;
  store::LeaseRefill refill_;
  store::LeaseStamps stamps_;
  std::unordered_map<std::string, algorithms::LeaseState> states_;
  std::vector<std::unordered_map<std::string, store::LeaseHand>> hands_;  // by gateway
  std::priority_queue<Due, std::vector<Due>, std::greater<>> due_;
  algorithms::LeaseState* current_ = nullptr;  // the key's whose hand is at work
  std::int64_t takes_ = 0;
};

struct Totals {
  std::uint64_t allowed = 0;
  std::uint64_t limited = 0;
};

}  // namespace

int RunLeaseReplay(const ReplayOptions& options, std::istream& in, std::ostream& out,
                   std::ostream& err) {
  const LeaseReplay& lease = *options.lease;
  for (const algorithms::LimitParams& p : options.windows) {
    if (const std::string_view why = algorithms::LeaseRefusal(p); !why.empty()) {
      fmt::print(err, "replay: {}\n", why);
      return 1;
    }
  }
  const store::LimitSpec spec = store::LimitSpec::Make(options.windows);
  store::LocalStoreOptions store_options;
  store_options.max_keys = std::size_t{1} << 24;
  store::LocalStore exact(store_options);
  Fleet fleet(options, lease.gateways);
  std::vector<Totals> by_gateway(static_cast<std::size_t>(lease.gateways));
  std::map<std::string, std::pair<Totals, Totals>, std::less<>> by_key;  // fleet, exact
  Totals fleet_totals, exact_totals;

  out << "t_ms,key,cost,gateway,decision,exact_decision\n";
  TraceReader reader(in, options);
  TraceLine parsed;
  std::string problem;
  std::size_t rows = 0;
  for (;;) {
    const TraceReader::Next next = reader.Read(parsed, problem);
    if (next == TraceReader::Next::kEnd) break;
    if (next == TraceReader::Next::kError) {
      out.flush();
      fmt::print(err, "{}:{}: {}\n", options.input_name, reader.line(), problem);
      return 1;
    }
    // Round-robin unless the row names its gateway.
    const std::int64_t g =
        parsed.gateway >= 0
            ? parsed.gateway
            : static_cast<std::int64_t>(rows % static_cast<std::size_t>(lease.gateways));
    ++rows;
    const std::string key(parsed.key);
    const bool allowed = fleet.Decide(g, key, parsed.cost, parsed.t_ms);
    const bool exact_allowed = exact.DecideNow({key, &spec, parsed.cost, parsed.t_ms}).allowed;
    auto& [key_fleet, key_exact] = by_key[key];
    for (auto [totals, yes] :
         {std::pair{&by_gateway[static_cast<std::size_t>(g)], allowed},
          std::pair{&key_fleet, allowed}, std::pair{&fleet_totals, allowed},
          std::pair{&key_exact, exact_allowed}, std::pair{&exact_totals, exact_allowed}}) {
      (yes ? totals->allowed : totals->limited) += 1;
    }
    fmt::print(out, "{},{},{},{},{},{}\n", parsed.t_ms, key, parsed.cost, g,
               allowed ? "allowed" : "limited", exact_allowed ? "allowed" : "limited");
  }
  out.flush();
  for (std::size_t g = 0; g < by_gateway.size(); ++g) {
    fmt::print(err, "gateway {}: allowed {}, limited {}\n", g, by_gateway[g].allowed,
               by_gateway[g].limited);
  }
  for (const auto& [key, totals] : by_key) {
    fmt::print(err, "{}: fleet allowed {}, one exact store allowed {}\n", key, totals.first.allowed,
               totals.second.allowed);
  }
  const double share =
      exact_totals.allowed == 0 ? 100.0 : 100.0 * fleet_totals.allowed / exact_totals.allowed;
  fmt::print(err,
             "fleet of {}: allowed {} ({:.1f}% of what one exact store allowed: {}), {} lease "
             "takes for {} requests\n",
             lease.gateways, fleet_totals.allowed, share, exact_totals.allowed, fleet.takes(),
             rows);
  return 0;
}

}  // namespace tollgate::gateway
