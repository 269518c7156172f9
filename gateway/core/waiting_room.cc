#include "gateway/core/waiting_room.h"

namespace tollgate::gateway {

std::optional<WaitingRoom::Ticket> WaitingRoom::Enter(std::string_view key, std::size_t max_per_key,
                                                      std::size_t& waiting_before) {
  std::lock_guard lock(mutex_);
  if (total_ >= max_total_) return std::nullopt;
  std::size_t& count = per_key_[std::string(key)];
  waiting_before = count;
  if (count >= max_per_key) {
    if (count == 0) per_key_.erase(std::string(key));
    return std::nullopt;
  }
  ++count;
  ++total_;
  return Ticket(this, std::string(key));
}

void WaitingRoom::Leave(const std::string& key) {
  std::lock_guard lock(mutex_);
  auto it = per_key_.find(key);
  if (it != per_key_.end() && --it->second == 0) per_key_.erase(it);
  --total_;
}

std::size_t WaitingRoom::waiting() const {
  std::lock_guard lock(mutex_);
  return total_;
}

}  // namespace tollgate::gateway
