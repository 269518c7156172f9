// Bounds the requests held by `action = "delay"` rules: at most
// `max_per_key` waiting per rule key and `max_total` in the process. A
// Ticket is a place in the room; destroying it (the request runs, is
// rejected, or its client went away) frees the place. Thread-safe.
#pragma once

#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace tollgate::gateway {

class WaitingRoom {
 public:
  explicit WaitingRoom(std::size_t max_total) : max_total_(max_total) {}

  class Ticket {
   public:
    Ticket(Ticket&& other) noexcept : room_(other.room_), key_(std::move(other.key_)) {
      other.room_ = nullptr;
    }
    Ticket& operator=(Ticket&& other) noexcept {
      if (this != &other) {
        if (room_ != nullptr) room_->Leave(key_);
        room_ = std::exchange(other.room_, nullptr);
        key_ = std::move(other.key_);
      }
      return *this;
    }
    ~Ticket() {
      if (room_ != nullptr) room_->Leave(key_);
    }

   private:
    friend class WaitingRoom;
    Ticket(WaitingRoom* room, std::string key) : room_(room), key_(std::move(key)) {}
    WaitingRoom* room_;
    std::string key_;
  };

  // A place, and how many of this key were already waiting; nullopt when
  // either bound is reached.
  std::optional<Ticket> Enter(std::string_view key, std::size_t max_per_key,
                              std::size_t& waiting_before);
  std::size_t waiting() const;

 private:
  void Leave(const std::string& key);

  const std::size_t max_total_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::size_t> per_key_;
  std::size_t total_ = 0;
};

}  // namespace tollgate::gateway
