#include "gateway/core/reservation_ledger.h"

namespace tollgate::gateway {

void ReservationLedger::Add(std::string_view key, std::int64_t units) {
  const std::lock_guard lock(mutex_);
  auto it = units_.find(key);
  if (it == units_.end()) it = units_.emplace(std::string(key), 0).first;
  it->second += units;
}

void ReservationLedger::Remove(std::string_view key, std::int64_t units) {
  const std::lock_guard lock(mutex_);
  const auto it = units_.find(key);
  if (it == units_.end()) return;
  it->second -= units;
  if (it->second <= 0) units_.erase(it);
}

std::int64_t ReservationLedger::InFlight(std::string_view key) const {
  const std::lock_guard lock(mutex_);
  const auto it = units_.find(key);
  return it == units_.end() ? 0 : it->second;
}

std::size_t ReservationLedger::keys() const {
  const std::lock_guard lock(mutex_);
  return units_.size();
}

}  // namespace tollgate::gateway
