// A waiting request as FairPlaces and WaitingRoom see it (`Base`: their
// Waiter), told its turn from whichever thread passed it by making its
// timer due on its own thread: a wait in progress ends, and a wait that
// starts later on the same expiry ends at once, so the news cannot fall
// between two waits (the caller checks its state before it sets the timer
// again). Shared (make_shared) with that posted wake-up, which may run
// after the waiting coroutine ended. Heavy (Asio): gateway implementation
// files only.
#pragma once

#include <memory>

#include "gateway/io/net.h"

namespace tollgate::gateway {

template <class Base>
class TimerWaiter final : public Base, public std::enable_shared_from_this<TimerWaiter<Base>> {
 public:
  explicit TimerWaiter(const Executor& executor) : timer(executor) {}
  // Its wait: Notify makes it due.
  Timer timer;

 private:
  void Notify() override {
    asio::post(timer.get_executor(), [self = this->shared_from_this()] {
      self->timer.expires_at(Timer::time_point::min());
    });
  }
};

}  // namespace tollgate::gateway
