#include "gateway/http2/types.h"

#include <algorithm>

namespace tollgate::gateway {

namespace {

class Http2ErrorCategory final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "http2"; }
  std::string message(int ev) const override {
    switch (static_cast<Http2Errc>(ev)) {
      case Http2Errc::kStreamReset:
        return "HTTP/2 stream reset";
      case Http2Errc::kConnectionClosed:
        return "HTTP/2 connection closed";
      case Http2Errc::kWrongState:
        return "not allowed in the HTTP/2 stream's state";
    }
    return "unknown HTTP/2 error";
  }
};

}  // namespace

PrefaceMatch MatchHttp2Preface(std::string_view bytes) {
  const std::size_t n = std::min(bytes.size(), kHttp2Preface.size());
  if (bytes.substr(0, n) != kHttp2Preface.substr(0, n)) return PrefaceMatch::kNo;
  return n == kHttp2Preface.size() ? PrefaceMatch::kYes : PrefaceMatch::kPrefix;
}

const boost::system::error_category& Http2Category() {
  static const Http2ErrorCategory category;
  return category;
}

ErrorCode MakeErrorCode(Http2Errc e) { return ErrorCode(static_cast<int>(e), Http2Category()); }

std::string_view ToString(Http2CloseReason reason) {
  switch (reason) {
    case Http2CloseReason::kOpen:
      return "open";
    case Http2CloseReason::kDone:
      return "done";
    case Http2CloseReason::kPeerClosed:
      return "peer_closed";
    case Http2CloseReason::kIdle:
      return "idle";
    case Http2CloseReason::kClosed:
      return "closed";
    case Http2CloseReason::kRapidReset:
      return "rapid_reset";
    case Http2CloseReason::kControlFlood:
      return "control_flood";
    case Http2CloseReason::kHeaderFlood:
      return "header_flood";
    case Http2CloseReason::kProtocolError:
      return "protocol_error";
    case Http2CloseReason::kIoError:
      return "io_error";
  }
  return "unknown";
}

namespace http2_detail {

Task<void> Wakeup::Wait(std::chrono::steady_clock::time_point deadline) {
  if (notified_) {
    notified_ = false;
    co_return;
  }
  if (!timer_) timer_.emplace(executor_);
  timer_->expires_at(deadline);
  co_await timer_->async_wait(kUseTuple);
  notified_ = false;
}

}  // namespace http2_detail

}  // namespace tollgate::gateway
