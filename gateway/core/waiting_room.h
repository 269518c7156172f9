// The process's waiting room for requests held by rules: those that a
// `delay` rule holds until it allows them, and those that wait for a
// `max_inflight` place. Each rule key has one line; in a line, requests
// take turns in a fair order between flows (FairQueue: a flow that keeps
// fifty waiting gets one turn for each turn of a flow that keeps one;
// weights and priorities as FairQueue says), and only the request whose
// turn it is tries the store. The others sleep until the turn is passed to
// them: nobody polls. A newcomer asks the store only when nobody waits in
// its line (max_inflight); a delay rule's newcomer is decided with the
// other rules before it could wait, so it may take a unit that came back
// while the head was waking up to ask for it (one store round trip).
//
// The request whose turn it is (the line's head) keeps it until it got
// what it waited for, or gave up (its deadline passed, its client left);
// Done passes the turn on. While it waits for a place, Wake (a place of the
// key was given back in this process) tells it to try again.
//
// Bounds: at most `max_per_key` requests per line, `max_per_flow` queued
// per flow in a line, and `max_total` in the room; when its line or the
// room is full a newcomer may push out a waiter of a lower priority of its
// own line (FairQueue::Push). Memory follows the waiters: a line exists
// only while it has some.
//
// Waiters are owned by the waiting requests and linked in place. A
// waiter hears of its turn (or of being pushed out) through Notify(),
// called with the room's lock held, on the thread that caused it: it must
// only hand the news to the waiter's own thread (post to its executor) and
// not call back in; it then reads its state with Status(). Thread-safe:
// one mutex; every operation is a few hash-map and queue steps under it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "gateway/core/fair_queue.h"

namespace tollgate::gateway {

class WaitingRoom {
 public:
  class Waiter : public FairQueue::Waiter {
   protected:
    ~Waiter() = default;

   private:
    friend class WaitingRoom;
    virtual void Notify() = 0;
    std::string key_;
    enum class State : std::uint8_t { kOut, kQueued, kTurn, kShed } state_ = State::kOut;
    bool woken_ = false;  // kTurn: a place was given back since TakeWake
  };

  struct Bounds {
    std::size_t max_per_key = 0;
    std::size_t max_per_flow = 0;
  };

  enum class Entered {
    kTurn,     // nobody waited: its turn at once
    kQueued,   // in line: wait for Notify
    kRefused,  // a bound is reached
  };

  explicit WaitingRoom(std::size_t max_total) : max_total_(max_total) {}
  WaitingRoom(const WaitingRoom&) = delete;
  WaitingRoom& operator=(const WaitingRoom&) = delete;

  // Puts `waiter` (its flow, weight and priority set) in `key`'s line. A
  // lower-priority waiter of the line pushed out to make room is notified.
  // `ahead` (when given), for kQueued: the waiters that go before it as the
  // line is now; beyond kAheadCounted of them, the whole line (a bound on
  // the work done under the lock).
  static constexpr std::size_t kAheadCounted = 1024;
  Entered Enter(std::string_view key, const Bounds& bounds, Waiter& waiter,
                std::size_t* ahead = nullptr);

  enum class Status { kWaiting, kTurn, kShed, kOut };
  Status StatusOf(const Waiter& waiter) const;

  // The waiter leaves the room, whatever its state: when it had the turn,
  // the next in line gets it (Notify). Idempotent.
  void Done(Waiter& waiter);

  // A place of `key` was given back: the line's head, if any, tries again.
  void Wake(std::string_view key);
  // For the head: whether Wake was called since the last TakeWake.
  bool TakeWake(Waiter& waiter);

  std::size_t waiting() const;
  std::size_t waiting(std::string_view key) const;
  std::size_t lines() const;

 private:
  struct Line {
    explicit Line(const FairQueueParams& params) : queue(params) {}
    FairQueue queue;
    Waiter* head = nullptr;
  };
  // Looked up by string_view: no string is built to find a line.
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using Lines = std::unordered_map<std::string, Line, Hash, std::equal_to<>>;
  // The next in line gets the turn; the line is forgotten when empty.
  void PassTurn(Lines::iterator it);

  const std::size_t max_total_;
  mutable std::mutex mutex_;
  Lines lines_;
  std::size_t total_ = 0;  // heads and queued waiters
};

}  // namespace tollgate::gateway
