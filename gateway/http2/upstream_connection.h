// The client side of HTTP/2 (RFC 9113) towards upstream servers, on
// libnghttp2, driven from the worker's io_context as the server side is
// (gateway/http2/connection.h): bytes read from the socket go into
// nghttp2_session_mem_recv, the frames it produces are written out from
// nghttp2_session_mem_send by one writer; no second event loop, no thread.
//
// An Http2UpstreamConnection is one server as seen from one worker thread: it
// multiplexes the requests of that thread over one connection, and opens
// another only when every stream the server allows on its connections
// (SETTINGS_MAX_CONCURRENT_STREAMS, and at most max_streams_per_connection)
// is taken, up to max_connections_per_server; beyond that, Open waits
// (FIFO, at most max_waiting_opens of them) for a stream to end.
// Http2UpstreamPool (upstream_pool.h) chooses the server.
//
// Failures, as the caller answers them (502/504, gRPC UNAVAILABLE and
// DEADLINE_EXCEEDED):
//   - Open: ConnectFailure::kRefused (no connection: refused, unreachable,
//     TLS failed, no ALPN "h2", the server's SETTINGS malformed; or too many
//     opens waiting) or kTimeout (connect, TLS, the SETTINGS exchange, or
//     the wait for a free stream took longer than the connect timeout).
//   - The stream's operations: beast::error::timeout when their deadline
//     passes; Http2Errc::kStreamReset when the server reset the stream (or
//     Reset() did); Http2Errc::kConnectionClosed when the connection ended
//     first; Http2Errc::kWrongState for calls out of order.
//
// Retries (RFC 9113 §8.7: a stream the server refused, or one above the
// last-stream-id of its GOAWAY, was not processed, so sending it again is
// safe whatever its method): such a stream is sent once more, on a
// connection that takes new streams (a new one after a GOAWAY), provided
// the request body written so far is at most max_replay_bytes (it is kept
// until then). At most one retry per stream. Streams at or below a
// GOAWAY's last-stream-id finish on their connection; new streams go to
// another one, and the connection closes once its streams have ended.
//
// Flow control, both ways: response DATA is acknowledged to the server
// (WINDOW_UPDATE) only as the caller reads it (ReadBody), so each stream
// buffers at most stream_window_bytes and a caller that reads slowly slows
// only its own stream; the connection window goes back on arrival. Request
// bodies leave as the server's windows allow (WriteBody waits for them).
//
// Deadlines: connect (TCP, TLS) and the SETTINGS exchange share Open's
// connect timeout; each socket write has write_timeout; ReadResponseHead,
// ReadBody and WriteBody have the timeout they are given; a connection
// with no stream for idle_timeout is closed (GOAWAY). Bounds: streams per
// connection and connections per server as above, each stream's response
// window, the frames taken from nghttp2 per write (max_outbound_bytes; no
// more is read from a server while they are backed up), the response
// header list (max_header_list_bytes, advertised; a larger one resets the
// stream), the replay copy (max_replay_bytes).
//
// Single-threaded: everything runs on the worker's executor. A session
// and its pool outlive every stream they opened.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string_view>
#include <vector>

#include "gateway/http2/types.h"
#include "gateway/http2/upstream_stream.h"
#include "gateway/io/net.h"
#include "gateway/io/upstream_pool.h"

namespace tollgate::gateway {

struct Http2UpstreamOptions {
  std::size_t max_connections_per_server = 4;
  std::uint32_t max_streams_per_connection = 128;
  std::size_t max_waiting_opens = 1024;
  // SETTINGS_INITIAL_WINDOW_SIZE: response bytes each stream buffers at most.
  std::uint32_t stream_window_bytes = 256 * 1024;
  std::uint32_t connection_window_bytes = 16 << 20;
  std::uint32_t max_header_list_bytes = 64 * 1024;
  std::size_t max_outbound_bytes = 64 * 1024;
  std::size_t max_replay_bytes = 64 * 1024;
  std::chrono::milliseconds write_timeout{30'000};
  std::chrono::milliseconds idle_timeout{60'000};
};

// Counters of one server's (or a pool's) HTTP/2 traffic, for tests and
// metrics.
struct Http2UpstreamStats {
  std::uint64_t connections = 0;  // connections that completed the SETTINGS exchange
  std::uint64_t streams = 0;      // streams opened, retries included
  std::uint64_t retries = 0;      // streams sent again (refused, or above a GOAWAY)
  std::uint64_t goaways = 0;      // GOAWAY frames received
  std::uint64_t waits = 0;        // opens that waited for a free stream
};

// Open's answer: a stream, or why none could be opened.
struct Http2OpenResult {
  Http2UpstreamStream stream;
  ConnectFailure failure = ConnectFailure::kNone;
  std::string_view server;  // "host:port" tried last (the pool's own string)
};

// Whether requests go over TLS (ALPN "h2", :scheme https) or cleartext
// with prior knowledge (:scheme http).
enum class Http2Transport { kTls, kCleartext };

// One server of an upstream, from one worker thread: its HTTP/2
// connections and the opens waiting for a stream on them.
class Http2UpstreamConnection {
 public:
  // `connector` makes the connections (TCP, TLS, passive health) to its
  // server `server`; it, `options` and `stats` must outlive the session.
  Http2UpstreamConnection(UpstreamPool& connector, std::size_t server, Http2Transport transport,
                       const Http2UpstreamOptions& options, Http2UpstreamStats& stats);
  // Closes every connection (their streams fail with kConnectionClosed).
  ~Http2UpstreamConnection();
  Http2UpstreamConnection(const Http2UpstreamConnection&) = delete;
  Http2UpstreamConnection& operator=(const Http2UpstreamConnection&) = delete;

  // Sends the request header on a connection with a free stream: an open
  // one, a new one, or, when max_connections_per_server are all full, the
  // first to free a stream. `connect_timeout` bounds all of it. The header
  // becomes :method, :scheme, :authority (from Host; the server's
  // "host:port" when there is none) and :path; connection-specific fields
  // are left out, and "te: trailers" is added (trailers are relayed).
  // CONNECT is not supported (kRefused).
  Task<Http2OpenResult> Open(const http::request_header<Fields>& head, Http2Body body,
                             std::chrono::steady_clock::duration connect_timeout);

  // Connections open (draining ones after a GOAWAY included).
  std::size_t connections() const { return connections_.size(); }
  std::string_view server_name() const { return connector_.ServerName(server_); }

 private:
  friend class http2_upstream_detail::Link;
  friend struct http2_upstream_detail::LinkCallbacks;
  friend class Http2UpstreamStream;
  struct Waiter;

  // Puts `stream` on a connection with a free stream (see Open), until
  // `deadline`.
  Task<ConnectFailure> Attach(http2_upstream_detail::StreamState& stream,
                              std::chrono::steady_clock::time_point deadline);
  // Sends an unprocessed stream again, once; false when it may not be.
  Task<bool> Retry(http2_upstream_detail::StreamState& stream,
                   std::chrono::steady_clock::time_point deadline);
  http2_upstream_detail::Link* WithRoom() const;
  std::size_t Accepting() const;  // connections that take new streams
  Task<ConnectFailure> Connect(std::chrono::steady_clock::time_point deadline);
  // Wakes up to `n` waiting opens, first come first.
  void Wake(std::size_t n);
  // From the connections: a stream ended, a GOAWAY came, the connection ended.
  void OnStreamEnd() { Wake(1); }
  void OnGoaway();
  void OnConnectionEnd(http2_upstream_detail::Link* connection);

  UpstreamPool& connector_;
  const std::size_t server_;
  const Http2Transport transport_;
  const Http2UpstreamOptions& options_;
  Http2UpstreamStats& stats_;
  std::vector<std::shared_ptr<http2_upstream_detail::Link>> connections_;
  std::deque<Waiter*> waiters_;
  std::size_t connecting_ = 0;
  std::uint64_t connect_failures_ = 0;
  ConnectFailure last_failure_ = ConnectFailure::kNone;
};

}  // namespace tollgate::gateway
