// One call to the Redis store awaited by an admin API coroutine: pass it
// as the call's sink, then co_await Wait(). The store answers every call
// within its timeout, so the wait is bounded. Admin thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gateway/io/net.h"
#include "store/redis_store.h"

namespace tollgate::gateway {

class StoreReply final : public store::CountSink, public store::ValuesSink {
 public:
  explicit StoreReply(const Executor& executor) : timer_(executor) {}
  StoreReply(const StoreReply&) = delete;
  StoreReply& operator=(const StoreReply&) = delete;
  void OnCount(const store::CountResult& result) override {
    status_ = result.status;
    count_ = result.value;
    Done();
  }
  void OnValues(const store::ValuesResult& result) override {
    status_ = result.status;
    values_ = result.values;
    texts_ = result.texts;
    Done();
  }
  // Resumes once answered.
  Task<store::StoreStatus> Wait() {
    while (!done_) {
      timer_.expires_at(Timer::time_point::max());
      co_await timer_.async_wait(kUseTuple);
    }
    co_return status_;
  }
  const std::vector<std::int64_t>& values() const { return values_; }
  const std::vector<std::string>& texts() const { return texts_; }
  std::int64_t count() const { return count_; }

 private:
  void Done() {
    done_ = true;
    timer_.cancel();
  }
  bool done_ = false;
  store::StoreStatus status_ = store::StoreStatus::kOk;
  std::int64_t count_ = 0;
  std::vector<std::int64_t> values_;
  std::vector<std::string> texts_;
  Timer timer_;
};

}  // namespace tollgate::gateway
