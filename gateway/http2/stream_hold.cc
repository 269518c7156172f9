#include "gateway/http2/stream_hold.h"

#include "gateway/http2/connection.h"

namespace tollgate::gateway {

Task<ClientWatch::Held> HoldStream(const Http2Stream& stream, Timer*& timer,
                                   std::chrono::milliseconds wait) {
  if (stream.cancelled()) co_return ClientWatch::Held::kClientGone;
  const Executor executor = co_await asio::this_coro::executor;
  Timer hold(executor, wait);
  timer = &hold;
  co_await hold.async_wait(kUseTuple);
  timer = nullptr;
  co_return stream.cancelled() ? ClientWatch::Held::kClientGone : ClientWatch::Held::kElapsed;
}

}  // namespace tollgate::gateway
