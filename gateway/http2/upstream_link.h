// The pieces of the client side of HTTP/2 (upstream_connection.h) below
// its public face: a stream's state (StreamState, owned by its
// Http2UpstreamStream) and one HTTP/2 connection to a server (Link, shared by
// its Http2UpstreamConnection, its loops and the streams on it). Include
// only from the client side's own .cc files. Single-threaded, as the
// worker that owns them.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "gateway/http2/endpoint.h"
#include "gateway/http2/header_list.h"
#include "gateway/http2/types.h"
#include "gateway/http2/upstream_connection.h"
#include "gateway/io/net.h"

namespace tollgate::gateway::http2_upstream_detail {

using Clock = std::chrono::steady_clock;

class Link;

// One exchange: the request as sent (kept for a retry) and the response as
// it arrives. Owned by its Http2UpstreamStream; a connection knows it by
// stream id until it closes or the handle goes.
struct StreamState {
  StreamState(Http2UpstreamConnection& owner, const Executor& executor)
      : session(owner), read_wake(executor), write_wake(executor) {}

  void WakeAll() {
    read_wake.Notify();
    write_wake.Notify();
  }
  ErrorCode Failure() const {
    return MakeErrorCode(lost && !local_reset ? Http2Errc::kConnectionClosed
                                              : Http2Errc::kStreamReset);
  }
  // Back to a stream not yet sent, for a retry: the body given so far goes
  // out again from the replay copy.
  void Rewind() {
    connection.reset();
    id = 0;
    headers_sent = false;
    response = {};
    head_done = false;
    in_trailers = false;
    no_body = false;
    header_bytes = 0;
    in.clear();
    in_end = false;
    trailers.clear();
    closed = false;
    lost = false;
    refused = false;
    reset_code = 0;
    out.data = asio::buffer(replay);
    out.last = body_ended;
    out.end_taken = false;
    out.trailers_pending = body_ended && !out.trailers.empty();
  }

  Http2UpstreamConnection& session;
  std::shared_ptr<Link> connection;
  std::int32_t id = 0;  // on `connection`
  http2_detail::HeaderList request;
  bool has_body = false;
  int attempts = 0;
  bool headers_sent = false;

  // Request body.
  http2_detail::BodySource out;  // what nghttp2 has yet to take, the end, trailers
  bool body_ended = false;       // the caller has given the end
  bool writing = false;
  std::string replay;  // the body given so far, while within max_replay_bytes
  bool replayable = true;

  // Response.
  http::response_header<Fields> response;
  bool head_done = false;    // the final header has arrived
  bool in_trailers = false;  // the header block arriving is the trailers
  bool no_body = false;      // the final header ended the stream
  std::size_t header_bytes = 0;
  beast::flat_buffer in;  // at most the stream's window
  bool in_end = false;
  Fields trailers;
  bool reading = false;

  // How it ended.
  bool closed = false;   // nghttp2 closed it, or its connection ended
  bool lost = false;     // its connection ended first
  bool refused = false;  // closed unprocessed: may be sent again
  bool local_reset = false;
  std::uint32_t reset_code = 0;

  http2_detail::Wakeup read_wake;
  http2_detail::Wakeup write_wake;
};

// The socket a Link owns, as a base ahead of its Endpoint (which keeps a
// reference to it).
struct OwnedStream {
  explicit OwnedStream(AnyStream s) : stream(std::move(s)) {}
  AnyStream stream;
};

// One HTTP/2 connection to a server. Its loops (http2_detail::Endpoint)
// keep it alive until they end; streams keep it alive while they use it.
class Link final : private OwnedStream,
                   private http2_detail::Endpoint,
                   public std::enable_shared_from_this<Link> {
 public:
  // `options` is copied; `owner` (null once it is gone) is told
  // when streams end, when a GOAWAY comes and when the link ends.
  Link(AnyStream stream, const Http2UpstreamOptions& options, Http2UpstreamConnection* owner);
  ~Link() override = default;
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  // Sends the preface and SETTINGS and starts the loops; done when the
  // server's SETTINGS has arrived, at most until `deadline`.
  Task<ConnectFailure> Handshake(Clock::time_point deadline);
  bool TakesStreams() const { return ready_ && !goaway_ && !terminating_ && !dead_; }
  std::size_t Room() const;
  // Sends `s`'s request header (and, as it comes, its body); false when
  // nghttp2 takes no more streams on this link.
  bool Submit(StreamState& s);
  // The handle goes: the stream is reset if still open and forgotten.
  void Detach(StreamState& s);
  void ResetStream(StreamState& s, std::uint32_t code);
  // Body data (or its end) is ready for nghttp2.
  void Resume(StreamState& s);
  // The caller has read `n` bytes of the response: window back.
  void Consume(StreamState& s, std::size_t n);
  void Orphan() { owner_ = nullptr; }
  void Close() { Teardown(); }

 private:
  friend struct LinkCallbacks;

  bool Start();
  StreamState* Find(std::int32_t id) const;
  // nghttp2 is done with stream `id` (closed, or its HEADERS never sent).
  void EndStream(std::int32_t id, std::uint32_t error_code);
  // The link ends: socket closed, every stream woken.
  void Teardown();

  // The Endpoint's hooks: any end of a loop ends the link.
  void Feed(const std::uint8_t* data, std::size_t size) override;
  void OnSessionError(int) override { Teardown(); }
  void OnReaderEnd(ErrorCode) override { Teardown(); }
  void OnWriterEnd(WriterEnd) override { Teardown(); }
  void OnClosed() override { Teardown(); }
  bool Idle() const override { return streams_.empty() && ready_; }

  const Http2UpstreamOptions options_;
  Http2UpstreamConnection* owner_;  // null once the session is gone
  // Streams nghttp2 has open or pending, by id; null once their handle went.
  std::unordered_map<std::int32_t, StreamState*> streams_;
  http2_detail::Wakeup settings_wake_;
  bool ready_ = false;   // the server's SETTINGS arrived
  bool goaway_ = false;  // the server's GOAWAY arrived
};

}  // namespace tollgate::gateway::http2_upstream_detail
