// Places (an upstream's connections under `max_connections` or its
// adaptive limit) handed to waiting requests in a fair order: a place that
// is given back goes straight to the waiter FairQueue picks, so nobody
// polls and a newcomer cannot take it while others wait. A place is a
// Place, given back on every path by its destructor; every Place must have
// gone back before the FairPlaces is destroyed (the gateway's workers,
// whose exchanges hold them, are destroyed first).
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
#include <utility>

#include "gateway/core/fair_queue.h"

namespace tollgate::gateway {

class FairPlaces {
 private:
  struct Key;

 public:
  // One place of a key, held from TryAcquire or a grant until destroyed;
  // it then goes to the next waiter. Movable; two pointers, no lookup to
  // give it back.
  class Place {
   public:
    Place(Place&& other) noexcept
        : places_(std::exchange(other.places_, nullptr)), key_(other.key_) {}
    Place& operator=(Place&& other) noexcept {
      if (this != &other) {
        Release();
        places_ = std::exchange(other.places_, nullptr);
        key_ = other.key_;
      }
      return *this;
    }
    Place(const Place&) = delete;
    Place& operator=(const Place&) = delete;
    ~Place() { Release(); }

   private:
    friend class FairPlaces;
    Place(FairPlaces* places, Key* key) : places_(places), key_(key) {}
    void Release() {
      if (places_ != nullptr) std::exchange(places_, nullptr)->GiveBack(*key_);
    }
    FairPlaces* places_;
    Key* key_;
  };

  class Waiter : public FairQueue::Waiter {
   public:
    // The place, once granted (read it after Notify(), on the waiter's own
    // thread, or after Leave returned true).
    std::optional<Place> place;

   protected:
    ~Waiter() = default;

   private:
    friend class FairPlaces;
    virtual void Notify() = 0;
    std::string key_;
  };

  FairPlaces() = default;
  FairPlaces(const FairPlaces&) = delete;
  FairPlaces& operator=(const FairPlaces&) = delete;

  // A place of `key` at once, when fewer than `max` are held and nobody
  // waits for one; nullopt otherwise. `max` is the key's limit from now on
  // (waiters first get what a higher one frees). `held`, when given, gets
  // the places of `key` held with this one (itself included).
  std::optional<Place> TryAcquire(std::string_view key, std::int64_t max,
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
  struct Key {
    explicit Key(const FairQueueParams& params) : queue(params) {}
    std::int64_t held = 0;
    std::int64_t max = 0;
    FairQueue queue;
    const std::string* name = nullptr;  // its key in keys_ (node-stable)
  };
  // Looked up by string_view: no string is built to find a key.
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using Keys = std::unordered_map<std::string, Key, Hash, std::equal_to<>>;

  void GiveBack(Key& key);
  // Grants places to waiters while `key` has room; lock held.
  void Dispatch(Key& key);
  // keys_'s entry for `key`, made if absent.
  Keys::iterator Entry(std::string_view key, const FairQueueParams& params);
  void ForgetIfIdle(Keys::iterator it);
  static bool Idle(const Key& k) { return k.held <= 0 && k.queue.size() == 0; }

  mutable std::mutex mutex_;
  Keys keys_;
};

}  // namespace tollgate::gateway
