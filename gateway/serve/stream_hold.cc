#include "gateway/serve/stream_hold.h"

#include "gateway/http2/connection.h"

namespace tollgate::gateway {

Task<ClientWatch::Held> HoldStream(const Http2Stream& stream, Timer*& slot, Timer& timer) {
  if (stream.cancelled()) co_return ClientWatch::Held::kClientGone;
  slot = &timer;
  co_await timer.async_wait(kUseTuple);
  slot = nullptr;
  co_return stream.cancelled() ? ClientWatch::Held::kClientGone : ClientWatch::Held::kElapsed;
}

}  // namespace tollgate::gateway
