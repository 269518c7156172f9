// Places (an upstream's connections under `max_connections` or its
// adaptive limit) handed to waiting requests in a fair order: a place that
// is given back goes straight to the waiter FairQueue picks, so nobody
// polls and a newcomer cannot take it while others wait. A store::
// PlaceKeeper: the places are store::InflightGuards, given back on every
// path by their destructors.
//
// A waiter hears of its turn through Notify(): it got a place (`place`
// holds it) or it was pushed out by a higher-priority newcomer (`place` is
// empty). Notify is called with the keeper's lock held, on the thread that
// caused it: it must only hand the news to the waiter's own thread (post
// to its executor) and not call back in. Thread-safe: one mutex; every operation is a few
// hash-map and queue steps under it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "gateway/core/fair_queue.h"
#include "store/inflight.h"

namespace tollgate::gateway {

class FairPlaces {
 public:
  class Waiter : public FairQueue::Waiter {
   public:
    // The place, once granted (read it after Notify(), on the waiter's own
    // thread, or after Leave returned true).
    std::optional<store::InflightGuard> place;

   protected:
    ~Waiter() = default;

   private:
    friend class FairPlaces;
    virtual void Notify() = 0;
    std::string key_;
  };

  FairPlaces();

  // A place of `key` at once, when fewer than `max` are held and nobody
  // waits for one; nullopt otherwise. `max` is the key's limit from now on
  // (waiters first get what a higher one frees). `held`, when given, gets
  // the places of `key` held with this one (itself included).
  std::optional<store::InflightGuard> TryAcquire(std::string_view key, std::int64_t max,
                                                 std::int64_t* held = nullptr);
  // Queues `waiter` for a place of `key` (its flow, weight and priority
  // set); a place already free is granted at once (Notify). kQueued: the
  // waiter waits for Notify() or gives up with Leave; otherwise it was
  // refused. A lower-priority waiter pushed out to make room is notified.
  // `params` bound the key's queue (the configuration in force).
  FairQueue::Pushed Enqueue(std::string_view key, std::int64_t max, Waiter& waiter,
                            const FairQueueParams& params);
  // The waiter gives up (deadline, client gone). True when it had been
  // granted a place meanwhile: `waiter.place` holds it.
  bool Leave(Waiter& waiter);
  // `key`'s limit is now `max` (an adaptive limit moved): waiters get the
  // places a higher limit frees.
  void SetLimit(std::string_view key, std::int64_t max);

  std::int64_t held(std::string_view key) const;
  std::size_t waiting(std::string_view key) const;
  std::size_t keys() const;  // keys with places held or waiters

 private:
  struct Keeper;
  struct Key {
    explicit Key(const FairQueueParams& params) : queue(params) {}
    std::int64_t held = 0;
    std::int64_t max = 0;
    FairQueue queue;
  };
  // Looked up by string_view: no string is built to find a key.
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using Keys = std::unordered_map<std::string, Key, Hash, std::equal_to<>>;

  void GiveBack(const std::string& key);
  // Grants places to waiters while `key` has room; lock held.
  void Dispatch(const std::string& name, Key& key);
  void ForgetIfIdle(Keys::iterator it);

  mutable std::mutex mutex_;
  Keys keys_;
  std::shared_ptr<Keeper> keeper_;  // guards hold it weakly
};

}  // namespace tollgate::gateway
