// The server side of an HTTP/2 connection (RFC 9113) on libnghttp2, driven
// from the worker's io_context: bytes read from the stream go into the
// nghttp2 session (nghttp2_session_mem_recv), the frames it produces are
// written out (nghttp2_session_mem_send); no nghttp2 I/O callbacks, no
// second event loop, no thread.
//
// The listeners get here through the HTTP/1.1 session, which hands the
// connection to an Http2Adapter (gateway/h2/adapter.h), the owner of the
// Http2Connection and its handlers:
//   - TLS: after the handshake, ALPN selected "h2".
//   - Cleartext with prior knowledge: the session, having read the first
//     bytes, sees MatchHttp2Preface() == kYes (kPrefix: read more), and
//     passes the bytes it has read to Run(); the connection parses the
//     preface itself.
//   - Drain: Shutdown() (GOAWAY, in-flight streams finish, then close);
//     a second signal or the drain deadline: Close().
//
// Each request runs as its own coroutine (the Http2Handler, co_spawned on
// the stream's executor once its header is complete); the connection
// outlives every handler: Run() returns only after all of them have.
//
// Bounds (every one of them ends in bounded work):
//   - max_concurrent_streams: advertised in SETTINGS; a stream beyond it is
//     refused (REFUSED_STREAM, also after the peer has acknowledged the
//     SETTINGS: the streams already open go on), and streams whose handler still runs count
//     even after the peer has reset them, so that resetting does not make
//     room for more handlers (CVE-2023-44487's amplification). A stream
//     whose response has ended no longer counts: its handler is only
//     finishing up, and its peer may already have opened the next one.
//   - The request header list (HPACK-decoded, RFC 7541's name + value + 32
//     per field) is bounded by max_header_list_bytes, advertised as
//     SETTINGS_MAX_HEADER_LIST_SIZE: a larger request header is answered 431
//     by the connection itself (the handler never sees it), then the stream
//     is reset (NO_ERROR); larger trailers reset the stream (ENHANCE_YOUR_CALM). Fields
//     past the bound are neither checked nor kept: nghttp2 only decodes the
//     rest of the block (HPACK's state needs it), without calling back, so
//     a block of references to one large stored value costs table lookups,
//     not the copies and character checks of the values. Beyond
//     max_oversized_headers such blocks the connection ends (GOAWAY
//     ENHANCE_YOUR_CALM).
//   - A header block may span at most max_continuations CONTINUATION frames
//     (CVE-2024-28182; Debian's nghttp2 1.52.0-1+deb12u2 has the option).
//   - Request bodies: each stream's window (stream_window_bytes) is given
//     back to the peer only as its handler reads (ReadBody), so a slow
//     handler slows only its own stream; the connection window is given
//     back on arrival. So each stream buffers at most its window. A request
//     still being sent when its response is complete and its handler done
//     (a refusal, say) is read and dropped until it ends, for at most
//     discard_bytes and discard_timeout, and only then reset (RST_STREAM
//     NO_ERROR, RFC 9113 §8.1): a client that is still uploading when the
//     reset comes may lose the response with it (curl 7.88 does).
//   - Response bodies: WriteBody hands data to nghttp2 only as the peer's
//     flow-control windows allow (a slow reader slows only its own stream),
//     and the connection takes at most max_outbound_bytes of frames from
//     nghttp2 per write, one write in flight; while that output is backed
//     up, nothing more is read from the peer. At most max_stalled_streams
//     WriteBody calls of a connection wait on a closed window (the stream's
//     or the connection's) at once: beyond that the stream is reset
//     (ENHANCE_YOUR_CALM) at once, so that a peer that opens no window
//     (SETTINGS_INITIAL_WINDOW_SIZE 0) cannot make every stream hold what
//     its handler holds (an upstream connection) until the write timeout.
//   - Floods: peer resets and stream errors the peer causes (malformed
//     requests, 431s) drain a token bucket (reset_burst, refilled at
//     resets_per_second); SETTINGS, PING, PRIORITY and empty DATA frames
//     drain another (control_frame_burst, control_frames_per_second). An
//     empty bucket ends the connection with GOAWAY ENHANCE_YOUR_CALM.
//     Unacknowledged SETTINGS/PING ACKs are bounded by max_outbound_ack.
//   - Time: idle_timeout closes (GOAWAY NO_ERROR) a connection that has
//     served no stream for that long (frames that open no stream, PING
//     included, do not keep it open); each write has write_timeout; a
//     handler's ReadBody/WriteBody have the timeout it gives them.
//
// A HEADERS frame that would open a stream with an id at or below one the
// peer has used already is a connection error (PROTOCOL_ERROR, RFC 9113
// §5.1.1), unless it is on a stream we reset lately (the peer may not have
// seen the RST_STREAM yet).
//
// Requests are checked as RFC 9113 §8 says (nghttp2 checks the pseudo-header
// set and order, connection-specific fields, TE other than "trailers",
// upper-case names, content-length against the DATA received; this layer
// makes invalid field characters and a Host that differs from :authority
// malformed too); a malformed request is a stream error (RST_STREAM
// PROTOCOL_ERROR) the handler never sees. No server push, no RFC 7540
// priorities (SETTINGS_NO_RFC7540_PRIORITIES), no extended CONNECT, no h2c
// upgrade from HTTP/1.1 (prior knowledge only).
//
// Single-threaded: everything here runs on the stream's executor.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gateway/http2/flood_guard.h"
#include "gateway/http2/frame_reader.h"
#include "gateway/http2/header_list.h"
#include "gateway/http2/options.h"
#include "gateway/io/net.h"

struct nghttp2_session;

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

class Http2Connection;
struct Http2Callbacks;  // nghttp2's callbacks (connection.cc)

// One request/response exchange. Valid from the handler's start to its end
// (the connection keeps it until then, also after a reset).
class Http2Stream {
 public:
  Http2Stream(const Http2Stream&) = delete;
  Http2Stream& operator=(const Http2Stream&) = delete;
  ~Http2Stream();

  std::int32_t id() const { return id_; }
  // The request header: method and target (:path; :authority for CONNECT)
  // from the pseudo-header fields, version 20, Host from :authority when the
  // request has no Host, cookie fields joined into one (RFC 9113 §8.2.3).
  // Mutable: the pipeline canonicalizes path and Host in place.
  http::request_header<Fields>& request() { return request_; }
  std::string_view scheme() const { return scheme_; }
  // The request header came without END_STREAM: a body (maybe empty) or
  // trailers follow.
  bool has_body() const { return has_body_; }

  // The next piece of the request body, at most `buffer`'s size, waiting at
  // most `timeout` for it. `end`: the body is complete after it (then also
  // with 0 bytes). Reading gives the window back to the peer.
  Task<Http2Read> ReadBody(asio::mutable_buffer buffer,
                           std::chrono::steady_clock::duration timeout);
  // The request's trailer fields, complete once ReadBody reported the end.
  const Fields& trailers() const { return trailers_; }
  // The rest of the request body is not wanted (the response is complete
  // without it): a pending ReadBody and later ones fail with kStreamReset.
  // Once the handler has returned and the response is sent, what the peer
  // still sends is dropped (see the bounds above).
  void AbandonRequestBody();

  // Sends the response header: a 1xx (not 101) is interim and may be
  // followed by another; a final one with kFollows is followed by WriteBody
  // and ends with WriteBody(kLast) or SubmitTrailers. Connection-specific
  // fields (Connection, Keep-Alive, Proxy-Connection, Transfer-Encoding,
  // Upgrade, TE) are dropped, names are sent in lower case. A response to
  // HEAD, a 204 and a 304 have no body whatever `body` says (their
  // WriteBody and SubmitTrailers calls then succeed and send nothing). A
  // gRPC trailers-only response is a final header with kNone.
  ErrorCode SubmitResponse(const http::response_header<Fields>& head, Http2Body body);
  // Sends `data` as response body, waiting at most `timeout` for the peer's
  // flow-control windows to take all of it (the data is not copied: it
  // must stay valid until this completes). One call at a time.
  Task<ErrorCode> WriteBody(asio::const_buffer data, BodyEnd end,
                            std::chrono::steady_clock::duration timeout);
  // Ends the response body with trailer fields (gRPC's status).
  ErrorCode SubmitTrailers(const Fields& trailers);
  // Resets the stream (RST_STREAM `code`); pending and later operations fail
  // with kStreamReset.
  void Reset(Http2ErrorCode code);

  // The stream ended before its response did: the peer reset it, or the
  // connection ended. Pending ReadBody/WriteBody calls wake with an error.
  bool cancelled() const { return cancelled_; }
  // RST_STREAM's code when the stream was reset (by either side).
  std::uint32_t reset_code() const { return reset_code_; }
  // `fn` runs once (posted to the executor) when the stream is cancelled,
  // at once if it is already; e.g. to stop an upstream call. `handle` (if
  // any), the handler's pointer to this stream, is set here and nulled if
  // the stream is freed before the handler: that happens only when the
  // io_context is destroyed with the handler's coroutine frame still
  // pending. A handler that outlives its return (an object of its own)
  // gives one, and calls Release with it when it ends.
  void OnCancel(std::function<void()> fn, Http2Stream** handle = nullptr);
  // The handler given `handle` ends: no cancel may reach it. Nothing when
  // the stream is gone already (`handle` null).
  static void Release(Http2Stream* handle);

 private:
  friend class Http2Connection;
  friend struct Http2Callbacks;
  enum class Handler { kNone, kReady, kRunning, kDone };

  Http2Stream(Http2Connection& connection, std::int32_t id);
  ErrorCode StateError() const;
  // Closed, or reset by Reset() (nghttp2 closes it once that is sent).
  bool Gone() const;
  void WakeAll();

  Http2Connection& connection_;
  const std::int32_t id_;
  http::request_header<Fields> request_;
  std::string scheme_;
  bool has_body_ = false;

  // Request header as it arrives (RFC 7541 sizes), then the body.
  std::size_t header_bytes_ = 0;
  bool header_too_large_ = false;
  std::string method_;
  std::string path_;
  std::string authority_;
  std::string host_;
  std::string cookie_;
  beast::flat_buffer in_;
  bool in_end_ = false;
  Fields trailers_;

  // Response.
  bool response_submitted_ = false;  // a final header
  bool response_has_body_ = false;
  bool body_suppressed_ = false;    // a body was announced where none may be
  bool response_ended_ = false;     // the handler has ended the response
  bool response_end_sent_ = false;  // END_STREAM written
  http2_detail::BodySource out_;    // WriteBody's data not yet taken, the end, trailers
  bool writing_ = false;
  bool reading_ = false;
  bool body_abandoned_ = false;
  // Response and handler done, the request body still arriving: dropped.
  bool discarding_ = false;
  std::uint64_t discarded_ = 0;
  std::chrono::steady_clock::time_point discard_until_;

  Handler handler_ = Handler::kNone;
  bool dispatched_ = false;  // counted in the connection's busy streams
  bool closed_ = false;      // nghttp2 closed the stream, or the connection ended
  bool finished_ = false;    // closed after its response's end, handler still running
  bool local_reset_ = false;
  bool cancelled_ = false;
  bool cancel_posted_ = false;
  std::uint32_t reset_code_ = 0;
  std::function<void()> cancel_fn_;
  Http2Stream** handle_ = nullptr;  // OnCancel's: nulled by the destructor
  http2_detail::Wakeup read_wake_;
  http2_detail::Wakeup write_wake_;
};

// Called for each request whose header is complete; runs as a coroutine of
// its own. A handler that returns before its response has ended leaves the
// stream reset (INTERNAL_ERROR).
using Http2Handler = std::function<Task<void>(Http2Stream&)>;

class Http2Connection {
 public:
  // `stream` (plain, or TLS with "h2" negotiated and the handshake done)
  // must outlive Run().
  Http2Connection(AnyStream& stream, const Http2Options& options, Http2Handler handler);
  ~Http2Connection();
  Http2Connection(const Http2Connection&) = delete;
  Http2Connection& operator=(const Http2Connection&) = delete;

  // Serves the connection until it ends and every handler has returned,
  // then closes the socket. `already_read`: bytes the caller read from the
  // stream before (the preface at least, for cleartext prior knowledge).
  Task<void> Run(asio::const_buffer already_read = {});
  // Graceful end (drain): GOAWAY (a notice first, the final last-stream-id
  // after a PING round trip), streams in flight finish, then the connection
  // closes. May come before Run() starts.
  void Shutdown();
  // Ends the connection now: pending operations of every stream fail.
  void Close();
  // `fn` runs for each request the connection answers 431 itself (its
  // header list above max_header_list_bytes; no handler runs for it), so
  // that it can be logged and counted.
  void OnHeaderTooLarge(std::function<void(Http2Stream&)> fn) {
    header_too_large_fn_ = std::move(fn);
  }

  // `fn` runs for each stream reset because max_stalled_streams others
  // wait on closed windows already (to log it).
  void OnStallBound(std::function<void(Http2Stream&)> fn) { stall_bound_fn_ = std::move(fn); }

  // Streams whose handler runs or whose response is still being sent.
  std::size_t busy_streams() const { return busy_; }
  const Http2Stats& stats() const { return stats_; }
  Http2CloseReason close_reason() const { return close_reason_; }

 private:
  friend class Http2Stream;
  friend struct Http2Callbacks;

  bool Start();
  Task<void> WriteLoop();
  Task<void> Watchdog();
  void OnHandlerDone(Http2Stream& stream);
  // Bytes from the peer into nghttp2; then handlers for complete requests.
  void Feed(const std::uint8_t* data, std::size_t size);
  // Frames from nghttp2 into pending_, up to max_outbound_bytes.
  void Pull();
  void Kick() { write_wake_.Notify(); }
  // nghttp2 failed fatally: a GOAWAY of our own after what is pending, no
  // more reading or pulling.
  void Fail(int nghttp2_error);
  // GOAWAY `code`, then close.
  void Terminate(Http2CloseReason reason, std::uint32_t code);
  // GOAWAY ENHANCE_YOUR_CALM, then close.
  void Calm(Http2CloseReason reason);
  // A stream error the peer caused; false when the reset budget is gone.
  void CountPeerFault();
  // The request header of `stream` passed max_header_list_bytes: 431, and
  // a strike against the connection.
  void RespondHeaderTooLarge(Http2Stream& stream);
  // A header block passed max_header_list_bytes: beyond
  // max_oversized_headers, GOAWAY ENHANCE_YOUR_CALM.
  void CountOversizedHeader();
  void Dispatch(Http2Stream& stream);
  void DispatchReady();
  // Forgets `stream` once both its handler and nghttp2 are done with it.
  void MaybeErase(Http2Stream& stream);
  // No stream is open: what only streams use is given back (the response
  // fields' list, the output buffers when empty), as nginx frees an idle
  // HTTP/2 connection's buffers; the next stream takes it again.
  void ReleaseIdleBuffers();
  void CloseStream(Http2Stream& stream, std::uint32_t error_code);
  // `stream`'s response is sent and its handler done, its request still
  // arriving: dropped until it ends or the discard bounds end it
  // (EndDiscard).
  void StartDiscard(Http2Stream& stream);
  // Whether `stream` can send no DATA now: its window or the connection's
  // is closed.
  bool WindowClosed(const Http2Stream& stream) const;
  // WriteBody of `stream` is about to wait on a closed window: false (and
  // the stream reset) when max_stalled_streams others wait so already.
  bool TakeStallPlace(Http2Stream& stream);
  void EndDiscard(Http2Stream& stream);
  void PostCancel(Http2Stream& stream);
  // The connection ends: socket closed, every stream woken.
  void Teardown(Http2CloseReason reason);
  void SetReason(Http2CloseReason reason) {
    if (close_reason_ == Http2CloseReason::kOpen) close_reason_ = reason;
  }
  bool Quiet() const { return tasks_ == 0; }
  void TaskDone();
  Http2Stream* Find(std::int32_t id);

  AnyStream& stream_;
  Executor executor_;
  Http2Options options_;
  Http2Handler handler_;
  std::function<void(Http2Stream&)> header_too_large_fn_;
  std::function<void(Http2Stream&)> stall_bound_fn_;
  nghttp2_session* session_ = nullptr;
  std::unordered_map<std::int32_t, std::unique_ptr<Http2Stream>> streams_;
  std::vector<std::int32_t> ready_;  // complete request headers seen by this Feed
  std::size_t busy_ = 0;
  std::size_t finished_ = 0;  // streams whose Http2Stream::finished_ is set
  std::size_t discarding_ = 0;  // streams whose Http2Stream::discarding_ is set
  std::int32_t highest_stream_ = 0;  // the highest stream id the peer has sent HEADERS on
  // The peer's SETTINGS shrank the HPACK table and nghttp2 has sent no
  // header block since (the next one carries the update).
  bool table_size_update_due_ = false;
  std::uint32_t peer_table_size_ = 4096;  // RFC 7541's initial size
  std::chrono::steady_clock::time_point idle_since_;
  std::chrono::steady_clock::time_point now_;  // of the current Feed

  // SubmitResponse's fields, reused (nghttp2 copies them on submission).
  http2_detail::HeaderList headers_;
  std::string pending_;  // frames taken from nghttp2, not yet written
  std::string writing_;  // the write in flight; empty when none is
  http2_detail::FrameReader reader_;

  http2_detail::FloodGuard flood_;
  http2_detail::Wakeup write_wake_;
  http2_detail::Wakeup read_wake_;  // output drained, or the end
  http2_detail::Wakeup done_wake_;  // a task ended
  Timer watchdog_;
  std::size_t tasks_ = 0;  // writer, watchdog, handlers, posted cancellations
  bool fatal_ = false;       // nghttp2 failed: no more frames from it
  bool terminating_ = false;  // GOAWAY that ends the connection queued
  bool finishing_ = false;    // all written: the sending side is shut
  bool dead_ = false;
  bool shutdown_asked_ = false;  // Shutdown() before Run() had started
  bool notice_sent_ = false;     // Shutdown()'s first GOAWAY
  bool final_goaway_ = false;
  std::chrono::steady_clock::time_point notice_at_;
  Http2CloseReason close_reason_ = Http2CloseReason::kOpen;
  Http2Stats stats_;
};

}  // namespace tollgate::gateway
