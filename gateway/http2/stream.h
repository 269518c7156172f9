// Http2Stream: one request/response exchange of the server side of HTTP/2
// (Http2Connection, connection.h), as its handler sees it: the request
// header, the request body as it arrives, the response as the handler
// gives it. Single-threaded, as its connection.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "gateway/http2/types.h"
#include "gateway/io/io_types.h"

namespace tollgate::gateway {

class Http2Connection;
struct Http2Callbacks;  // nghttp2's callbacks (server_callbacks.h)

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
  // The request header complete: request() made from the fields as they
  // came; false when they make the request malformed.
  bool TakeRequestHeader();
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

}  // namespace tollgate::gateway
