// Http2UpstreamStream: one request/response exchange with an upstream
// server over HTTP/2, as the caller of Http2UpstreamConnection::Open
// (upstream_connection.h) holds it. Single-threaded, as its connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>

#include "gateway/http2/types.h"
#include "gateway/io/io_types.h"

namespace tollgate::gateway {

namespace http2_upstream_detail {
struct StreamState;
class Link;
struct LinkCallbacks;
}  // namespace http2_upstream_detail

class Http2UpstreamConnection;

// One request/response exchange with an upstream server. Move-only; the
// default-constructed one is empty. Destroying a stream that has not ended
// resets it (RST_STREAM CANCEL).
class Http2UpstreamStream {
 public:
  Http2UpstreamStream();
  Http2UpstreamStream(Http2UpstreamStream&&) noexcept;
  Http2UpstreamStream& operator=(Http2UpstreamStream&&) noexcept;
  ~Http2UpstreamStream();
  explicit operator bool() const { return state_ != nullptr; }

  // The request body (Open with Http2Body::kFollows): sends `data`,
  // waiting at most `timeout` for the server's flow-control windows to take
  // all of it. `data` must stay valid until this completes. One call at a
  // time; the body ends with kLast (its piece may be empty) or with
  // EndBody().
  Task<ErrorCode> WriteBody(asio::const_buffer data, BodyEnd end,
                            std::chrono::steady_clock::duration timeout);
  // Ends the request body with trailer fields.
  ErrorCode EndBody(const Fields& trailers);

  // Waits at most `timeout` for the final response header (interim 1xx
  // ones are passed over), then response() holds it: its status, its
  // fields (names in lower case), version 20. May complete before the
  // request body has been sent (an early answer such as 413).
  Task<ErrorCode> ReadResponseHead(std::chrono::steady_clock::duration timeout);
  http::response_header<Fields>& response();
  // The response has a body or trailers to read: ReadBody until `end`.
  bool response_has_body() const;
  // The next piece of the response body, at most `buffer`'s size, waiting at
  // most `timeout` for it; `end`: the body (and trailers()) is complete,
  // also with 0 bytes. Reading gives the stream's window back to the server.
  Task<Http2Read> ReadBody(asio::mutable_buffer buffer,
                           std::chrono::steady_clock::duration timeout);
  // The response's trailer fields (gRPC's grpc-status), complete at `end`.
  const Fields& trailers() const;

  // Abandons the exchange (the client went away): RST_STREAM CANCEL;
  // pending and later operations fail with kStreamReset.
  void Reset();
  // RST_STREAM's error code when the stream was reset (by either side).
  std::uint32_t reset_code() const;
  // "host:port" of the server, as configured (the pool's own string).
  std::string_view server() const;

 private:
  friend class Http2UpstreamConnection;
  explicit Http2UpstreamStream(std::unique_ptr<http2_upstream_detail::StreamState> state);
  // Until nghttp2 has taken what `s` has to send (and its end, when that
  // was given), sending the stream again when the server did not process it.
  static Task<ErrorCode> WaitTaken(http2_upstream_detail::StreamState& s,
                                   std::chrono::steady_clock::time_point deadline);

  std::unique_ptr<http2_upstream_detail::StreamState> state_;
};

}  // namespace tollgate::gateway
