// The vocabulary both sides of tollgate's HTTP/2 (the server side,
// connection.h, and the client side towards upstreams,
// upstream_connection.h) share: the preface, RFC 9113's error codes, the
// errors of their stream operations, why a connection ended, and the small
// pieces their streams are made of (a wake-up, a body handed to nghttp2).
// Single-threaded, as the connections that use them.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gateway/io/io_types.h"

namespace tollgate::gateway {

// The client connection preface (RFC 9113 §3.4).
inline constexpr std::string_view kHttp2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

enum class PrefaceMatch {
  kNo,      // not HTTP/2 prior knowledge
  kPrefix,  // the bytes so far begin the preface: read more to decide
  kYes,     // starts with the whole preface
};
// Whether `bytes`, the first bytes read from a cleartext connection, are
// HTTP/2 with prior knowledge (RFC 9113 §3.3).
PrefaceMatch MatchHttp2Preface(std::string_view bytes);

// RST_STREAM and GOAWAY error codes (RFC 9113 §7).
enum class Http2ErrorCode : std::uint32_t {
  kNoError = 0x0,
  kProtocolError = 0x1,
  kInternalError = 0x2,
  kFlowControlError = 0x3,
  kSettingsTimeout = 0x4,
  kStreamClosed = 0x5,
  kFrameSizeError = 0x6,
  kRefusedStream = 0x7,
  kCancel = 0x8,
  kCompressionError = 0x9,
  kConnectError = 0xa,
  kEnhanceYourCalm = 0xb,
  kInadequateSecurity = 0xc,
  kHttp11Required = 0xd,
};

// Errors of Http2Stream's operations (besides beast::error::timeout).
enum class Http2Errc {
  kStreamReset = 1,   // the stream was reset (by the peer, or by Reset())
  kConnectionClosed,  // the connection ended first
  kWrongState,        // not allowed now (e.g. WriteBody before SubmitResponse)
};
const boost::system::error_category& Http2Category();
ErrorCode MakeErrorCode(Http2Errc e);

// Why a connection ended (logs, metrics, tests).
enum class Http2CloseReason {
  kOpen,           // not yet
  kDone,           // GOAWAY sent or received and every stream finished
  kPeerClosed,     // the peer closed the connection
  kIdle,           // idle_timeout
  kClosed,         // Close()
  kRapidReset,     // reset budget exhausted: GOAWAY ENHANCE_YOUR_CALM
  kControlFlood,   // control-frame budget exhausted: GOAWAY ENHANCE_YOUR_CALM
  kHeaderFlood,    // beyond max_oversized_headers: GOAWAY ENHANCE_YOUR_CALM
  kProtocolError,  // a connection error found by nghttp2 (GOAWAY sent)
  kIoError,        // a read or write failed or timed out
};
std::string_view ToString(Http2CloseReason reason);

// What a server connection counted (metrics, tests).
struct Http2Stats {
  std::uint64_t streams = 0;           // requests handed to the handler
  std::uint64_t refused = 0;           // REFUSED_STREAM (max_concurrent_streams)
  std::uint64_t peer_resets = 0;       // RST_STREAM received
  std::uint64_t malformed = 0;         // stream errors for malformed requests
  std::uint64_t header_too_large = 0;  // answered 431
  std::uint64_t stall_resets = 0;      // reset beyond max_stalled_streams
};

// SubmitResponse's: whether a body follows (WriteBody, SubmitTrailers).
enum class Http2Body { kNone, kFollows };
// WriteBody's: whether this is the body's last piece.
enum class BodyEnd { kMore, kLast };

struct Http2Read {
  ErrorCode ec;
  std::size_t bytes = 0;
  bool end = false;  // the body ends with these bytes; trailers() are complete
};

namespace http2_detail {

// Wakes one waiting coroutine; a wake-up that comes while none waits is kept
// for the next wait. Its timer is made by the first wait that needs one: a
// stream's body wake-ups mostly never wait (a request without a body), and
// a Notify without a timer costs nothing.
class Wakeup {
 public:
  explicit Wakeup(const Executor& executor) : executor_(executor) {}
  void Notify() {
    notified_ = true;
    if (timer_) timer_->cancel();
  }
  // Returns when notified (perhaps before the call) or at `deadline`; the
  // caller checks what it waits for.
  Task<void> Wait(std::chrono::steady_clock::time_point deadline);

 private:
  Executor executor_;
  std::optional<Timer> timer_;
  bool notified_ = false;
};

// A body handed to nghttp2 piece by piece (frame_io.h's ReadBodySource):
// what is left of the piece, whether the body ends after it, and the
// trailer fields that end it.
struct BodySource {
  asio::const_buffer data;  // not yet taken by nghttp2
  bool last = false;        // the body ends after `data`
  bool end_taken = false;   // nghttp2 has taken the end
  bool trailers_pending = false;
  std::vector<std::pair<std::string, std::string>> trailers;
};

}  // namespace http2_detail

}  // namespace tollgate::gateway
