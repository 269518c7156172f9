// The server side of an HTTP/2 connection (RFC 9113) on libnghttp2, driven
// from the worker's io_context by http2_detail::Endpoint (endpoint.h: the
// reader, the writer, the watchdog); no nghttp2 I/O callbacks, no thread.
// Its owner (an adapter above this codec) gives it a connection whose ALPN
// chose "h2", or a cleartext one whose first bytes (passed to Run) begin
// the preface (MatchHttp2Preface); drains it with Shutdown() (GOAWAY,
// in-flight streams finish, then close), and ends it with Close().
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

#include "gateway/http2/endpoint.h"
#include "gateway/http2/flood_guard.h"
#include "gateway/http2/header_list.h"
#include "gateway/http2/options.h"
#include "gateway/http2/stream.h"
#include "gateway/http2/types.h"
#include "gateway/io/net.h"

struct nghttp2_session;

namespace tollgate::gateway {

class Http2Connection final : private http2_detail::Endpoint {
 public:
  // `stream` (plain, or TLS with "h2" negotiated and the handshake done)
  // must outlive Run().
  Http2Connection(AnyStream& stream, const Http2Options& options, Http2Handler handler);
  ~Http2Connection() override;
  Http2Connection(const Http2Connection&) = delete;
  Http2Connection& operator=(const Http2Connection&) = delete;

  // Serves the connection until it ends and every handler has returned,
  // then closes the socket. `already_read`: bytes the caller read from the
  // stream before (the preface at least, for cleartext prior knowledge).
  // Starts at the call (not at its first resumption).
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
  void OnHandlerDone(Http2Stream& stream);
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
  Http2Stream* Find(std::int32_t id);

  // The Endpoint's hooks.
  // Bytes from the peer into nghttp2; then handlers for complete requests.
  void Feed(const std::uint8_t* data, std::size_t size) override;
  void OnSessionError(int nghttp2_error) override { Fail(nghttp2_error); }
  void OnReaderEnd(ErrorCode ec) override;
  void OnWriterEnd(WriterEnd end) override;
  void OnClosed() override { Teardown(Http2CloseReason::kDone); }
  // The last stream may have gone before its frames were written.
  void OnOutputIdle() override {
    if (streams_.empty()) ReleaseIdleBuffers();
  }
  bool Idle() const override { return busy_ == 0; }
  void OnIdleTimeout() override { SetReason(Http2CloseReason::kIdle); }
  // Discards that have run out, and Shutdown()'s final GOAWAY.
  Clock::time_point Watch(Clock::time_point now) override;

  Http2Options options_;
  Http2Handler handler_;
  std::function<void(Http2Stream&)> header_too_large_fn_;
  std::function<void(Http2Stream&)> stall_bound_fn_;
  std::unordered_map<std::int32_t, std::unique_ptr<Http2Stream>> streams_;
  std::vector<std::int32_t> ready_;  // complete request headers seen by this Feed
  std::size_t busy_ = 0;
  std::size_t finished_ = 0;  // streams whose Http2Stream::finished_ is set
  std::size_t discarding_ = 0;  // streams whose Http2Stream::discarding_ is set
  std::int32_t highest_stream_ = 0;  // the highest stream id the peer has sent HEADERS on
  // The peer's SETTINGS shrank the HPACK table and nghttp2 has sent no
  // header block since (the next one carries the update).
  bool table_size_update_due_ = false;
  std::uint32_t peer_table_size_ = 4096;       // RFC 7541's initial size
  std::chrono::steady_clock::time_point now_;  // of the current Feed

  // SubmitResponse's fields, reused (nghttp2 copies them on submission).
  http2_detail::HeaderList headers_;
  http2_detail::FloodGuard flood_;
  bool shutdown_asked_ = false;  // Shutdown() before Run() had started
  bool notice_sent_ = false;     // Shutdown()'s first GOAWAY
  bool final_goaway_ = false;
  std::chrono::steady_clock::time_point notice_at_;
  Http2CloseReason close_reason_ = Http2CloseReason::kOpen;
  Http2Stats stats_;
};

}  // namespace tollgate::gateway
