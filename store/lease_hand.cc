#include "store/lease_hand.h"

#include <algorithm>

namespace tollgate::store {

LeaseHand::LeaseHand(std::int64_t now_ms, std::int64_t ttl_ms, LeaseRefill refill,
                     LeaseStamps stamps)
    : ttl_ms_(ttl_ms),
      bucket_(refill == LeaseRefill::kHeldBack),
      log_(stamps == LeaseStamps::kKept),
      period_start_(now_ms) {}

void LeaseHand::Release(Held& held, std::int64_t now, Releases& releases) {
  in_hand_ -= held.left;
  releases.OnRelease(
      held, (held.left > 0 || ReturnsSpent(now)) ? LeaseEnd::kReturn : LeaseEnd::kForget, now);
}

void LeaseHand::Expire(std::int64_t now, Releases& releases) {
  auto end = held_.begin();
  while (end != held_.end() && end->end_ms <= now) Release(*end++, now, releases);
  held_.erase(held_.begin(), end);
}

void LeaseHand::ReleaseAll(std::int64_t now, Releases& releases) {
  for (Held& held : held_) Release(held, now, releases);
  held_.clear();
}

void LeaseHand::SpendUnits(std::int64_t cost, std::int64_t now) {
  std::int64_t need = cost;
  for (Held& h : held_) {
    if (need == 0) break;
    const std::int64_t take = std::min(need, h.left);
    h.left -= take;
    h.used += take;
    need -= take;
    if (log_ && take > 0) {
      if (!h.used_at.empty() && h.used_at.back().ts == now) {
        h.used_at.back().count += take;
      } else {
        h.used_at.push_back({now, take});
      }
    }
  }
  in_hand_ -= cost;
}

void LeaseHand::ReleaseSpent(std::int64_t now, Releases& releases) {
  // A busy key's bucket lease spent to the last unit goes back now: the
  // shared state refills the bucket only past the units it still counts as
  // leased. A sliding_log's, for its used slots to move to their times.
  if (!ReturnsSpent(now)) return;
  auto end = held_.begin();
  while (end != held_.end() && end->left == 0) Release(*end++, now, releases);
  held_.erase(held_.begin(), end);
}

bool LeaseHand::Spend(std::int64_t cost, std::int64_t now, algorithms::Decision& d,
                      Releases& releases) {
  if (in_hand_ < cost) return false;
  SpendUnits(cost, now);
  NoteUse(now, cost);
  ReleaseSpent(now, releases);
  d = {};
  d.allowed = true;
  d.remaining = in_hand_;
  const std::int64_t lasts =
      held_.empty() ? 0 : std::max<std::int64_t>(0, held_.front().end_ms - now);
  d.reset_ms = d.window_reset_ms = lasts;
  return true;
}

LeaseHand::Settled LeaseHand::Settle(std::int64_t reserved_at, std::int64_t now,
                                     std::int64_t reserved, std::int64_t actual,
                                     std::int64_t most_debt, Releases& releases) {
  Settled out;
  if (actual < reserved) {
    std::int64_t refund = reserved - actual;
    // Newest first: the leases a later request would spend last.
    for (auto h = held_.rbegin(); h != held_.rend() && refund > 0; ++h) {
      if (h->start_ms > reserved_at || h->end_ms <= now) continue;
      const std::int64_t back = std::min(refund, h->used);
      h->used -= back;
      h->left += back;
      refund -= back;
      out.refunded += back;
    }
    in_hand_ += out.refunded;
    return out;
  }
  const std::int64_t charge = actual - reserved;
  out.charged = std::min(charge, in_hand_);
  SpendUnits(out.charged, now);
  NoteUse(now, charge);
  debt_ = std::min(most_debt, debt_ + charge - out.charged);
  ReleaseSpent(now, releases);
  return out;
}

std::int64_t LeaseHand::PayDebt(std::int64_t now, Releases& releases) {
  const std::int64_t paid = std::min(debt_, in_hand_);
  if (paid == 0) return 0;
  SpendUnits(paid, now);
  debt_ -= paid;
  ReleaseSpent(now, releases);
  return paid;
}

algorithms::Decision LeaseHand::Shown(std::int64_t now) const {
  if (Blocked(now)) return Limited(now);
  algorithms::Decision d;
  d.allowed = in_hand_ > 0;
  d.remaining = in_hand_;
  const std::int64_t lasts =
      held_.empty() ? 0 : std::max<std::int64_t>(0, held_.front().end_ms - now);
  d.reset_ms = d.window_reset_ms = lasts;
  return d;
}

algorithms::Decision LeaseHand::Limited(std::int64_t now) const {
  algorithms::Decision d;
  d.allowed = false;
  d.remaining = 0;
  d.retry_after_ms = std::max<std::int64_t>(0, blocked_until_ - now);
  d.reset_ms = d.window_reset_ms = d.retry_after_ms;
  return d;
}

bool LeaseHand::ReturnsSpent(std::int64_t now) const {
  return (bucket_ || log_) && Rate(now) >= kBusy;
}

std::int64_t LeaseHand::Rate(std::int64_t now) const {
  const std::int64_t elapsed = std::max<std::int64_t>(0, now - period_start_);
  // Periods roll only when a unit is used (NoteUse): after a pause the
  // current one may already be the one before, or older.
  if (elapsed >= 2 * ttl_ms_) return 0;
  if (elapsed >= ttl_ms_) return used_now_ * (2 * ttl_ms_ - elapsed) / ttl_ms_;
  // The previous period weighted by the part of it still within one
  // lease_ttl of now, as two_bucket estimates a sliding window.
  return used_now_ + used_before_ * (ttl_ms_ - elapsed) / ttl_ms_;
}

void LeaseHand::NoteUse(std::int64_t now, std::int64_t cost) {
  if (now - period_start_ >= 2 * ttl_ms_) {
    used_before_ = 0;
    used_now_ = 0;
    period_start_ = now;
  } else if (now - period_start_ >= ttl_ms_) {
    used_before_ = used_now_;
    used_now_ = 0;
    period_start_ += ttl_ms_;
  }
  used_now_ += cost;
  last_use_ = now;
}

std::int64_t LeaseHand::Horizon(std::int64_t now) const {
  if (held_.empty() || !held_.back().cut_short) return ttl_ms_;
  return std::clamp<std::int64_t>(held_.back().end_ms - now, 1, ttl_ms_);
}

std::int64_t LeaseHand::Want(std::int64_t now, std::int64_t need, std::int64_t max_units) const {
  // Units its window's end would strand in this hand are units the other
  // gateways cannot have in that window.
  const std::int64_t use = Rate(now) * Horizon(now) / ttl_ms_;
  const std::int64_t want = std::min(std::max<std::int64_t>(use, 1), max_units);
  return std::max(want, need);
}

bool LeaseHand::WantsRenewal(std::int64_t now) const {
  if (Blocked(now)) return false;
  const std::int64_t rate = Rate(now);
  // A key used once per lease_ttl or less takes a lease when a request
  // needs one, as a decision would cost.
  if (rate < kBusy) return false;
  // Few: less than a quarter of the use expected while a lease taken now
  // would last.
  const bool few = in_hand_ * 4 * ttl_ms_ <= rate * Horizon(now);
  // Near a window's end every lease ends with the window: renewing early
  // gains nothing, and a renewal that asked again on every answer would
  // take the window's whole budget into this hand.
  const bool ending =
      held_.empty() || (!held_.back().cut_short && held_.back().end_ms - now <= ttl_ms_ / 4);
  return few || ending;
}

std::int64_t LeaseHand::Add(std::int64_t sent_ms, std::int64_t units, std::int64_t valid_ms,
                            std::span<const std::int64_t> stamps) {
  Held h{units, 0, sent_ms + valid_ms, sent_ms, valid_ms < ttl_ms_, {stamps.begin(), stamps.end()},
         {}};
  auto at = held_.end();
  while (at != held_.begin() && (at - 1)->end_ms > h.end_ms) --at;
  const std::int64_t end = h.end_ms;
  held_.insert(at, std::move(h));
  in_hand_ += units;
  return end;
}

std::int64_t LeaseHand::Block(std::int64_t sent_ms, std::int64_t retry_after_ms) {
  blocked_until_ = sent_ms + std::clamp<std::int64_t>(retry_after_ms, 1, ttl_ms_);
  return blocked_until_;
}

bool LeaseHand::Quiet(std::int64_t now, std::int64_t& look_again) const {
  look_again = 0;
  if (debt_ > 0 && held_.empty() && !Blocked(now)) look_again = now + ttl_ms_;
  if (!held_.empty() || Blocked(now) || debt_ > 0) return false;
  const std::int64_t quiet_at = last_use_ + ttl_ms_;
  if (quiet_at <= now) return true;
  look_again = quiet_at;
  return false;
}

}  // namespace tollgate::store
