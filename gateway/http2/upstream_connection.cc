#include "gateway/http2/upstream_connection.h"

#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>

#include "gateway/http2/frame_io.h"
#include "gateway/http2/frame_reader.h"
#include "gateway/http2/header_list.h"
#include "base/loop_time.h"

namespace tollgate::gateway {

using Clock = std::chrono::steady_clock;

namespace {

// The first send and one retry (RFC 9113 §8.7).
constexpr int kMaxAttempts = 2;
// RFC 7541 §4.1: each field's size in a header list.
constexpr std::size_t kFieldOverhead = 32;

bool NegotiatedH2(AnyStream& stream) {
  auto* tls = std::get_if<TlsStream>(&stream);
  if (tls == nullptr) return false;
  const unsigned char* alpn = nullptr;
  unsigned int alpn_len = 0;
  SSL_get0_alpn_selected(tls->native_handle(), &alpn, &alpn_len);
  return std::string_view(reinterpret_cast<const char*>(alpn), alpn_len) == "h2";
}

}  // namespace

namespace http2_upstream_detail {

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
  std::shared_ptr<Connection> connection;
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

// One HTTP/2 connection to a server. Its loops (reader, writer, watchdog)
// keep it alive until it ends; streams keep it alive while they use it.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(AnyStream stream, const Http2UpstreamOptions& options, Http2UpstreamConnection* owner)
      : stream_(std::move(stream)),
        executor_(Lowest(stream_).get_executor()),
        options_(options),
        owner_(owner),
        write_wake_(executor_),
        read_wake_(executor_),
        settings_wake_(executor_),
        watchdog_(executor_) {}
  ~Connection() {
    if (session_ != nullptr) nghttp2_session_del(session_);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Sends the preface and SETTINGS and starts the loops; done when the
  // server's SETTINGS has arrived, at most until `deadline`.
  Task<ConnectFailure> Handshake(Clock::time_point deadline);
  bool TakesStreams() const { return ready_ && !goaway_ && !terminating_ && !dead_; }
  std::size_t Room() const;
  // Sends `s`'s request header (and, as it comes, its body); false when
  // nghttp2 takes no more streams on this connection.
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
  static int OnBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* user_data);
  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name,
                      std::size_t name_size, const std::uint8_t* value, std::size_t value_size,
                      std::uint8_t, void* user_data);
  static int OnFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user_data);
  static int OnDataChunk(nghttp2_session* session, std::uint8_t, std::int32_t id,
                         const std::uint8_t* data, std::size_t size, void* user_data);
  static int OnFrameSend(nghttp2_session*, const nghttp2_frame* frame, void* user_data);
  static int OnFrameNotSend(nghttp2_session*, const nghttp2_frame* frame, int, void* user_data);
  static int OnStreamClose(nghttp2_session*, std::int32_t id, std::uint32_t error_code,
                           void* user_data);
  static ssize_t ReadData(nghttp2_session* session, std::int32_t id, std::uint8_t* buf,
                          std::size_t length, std::uint32_t* data_flags, nghttp2_data_source*,
                          void* user_data);

  bool Start();
  // Each loop holds the connection (`keep_alive`) until it ends.
  Task<void> ReadLoop(std::shared_ptr<Connection> keep_alive);
  Task<void> WriteLoop(std::shared_ptr<Connection> keep_alive);
  Task<void> Watchdog(std::shared_ptr<Connection> keep_alive);
  // Bytes from the server into nghttp2, then frames out.
  void Feed(const std::uint8_t* data, std::size_t size);
  // Frames from nghttp2 into pending_, up to max_outbound_bytes.
  void Pull();
  void Kick() { write_wake_.Notify(); }
  StreamState* Find(std::int32_t id) const;
  // nghttp2 is done with stream `id` (closed, or its HEADERS never sent).
  void EndStream(std::int32_t id, std::uint32_t error_code);
  // The connection ends: socket closed, every stream woken.
  void Teardown();

  AnyStream stream_;
  Executor executor_;
  const Http2UpstreamOptions options_;
  Http2UpstreamConnection* owner_;  // null once the session is gone
  nghttp2_session* session_ = nullptr;
  // Streams nghttp2 has open or pending, by id; null once their handle went.
  std::unordered_map<std::int32_t, StreamState*> streams_;
  Clock::time_point idle_since_;
  std::string pending_;  // frames taken from nghttp2, not yet written
  std::string writing_;  // the write in flight
  http2_detail::FrameReader reader_;
  http2_detail::Wakeup write_wake_;
  http2_detail::Wakeup read_wake_;  // output drained, or the end
  http2_detail::Wakeup settings_wake_;
  Timer watchdog_;
  bool ready_ = false;        // the server's SETTINGS arrived
  bool goaway_ = false;       // the server's GOAWAY arrived
  bool terminating_ = false;  // our GOAWAY (idle) is queued
  bool dead_ = false;
};

Task<ConnectFailure> Connection::Handshake(Clock::time_point deadline) {
  idle_since_ = store::LoopNow();
  if (!Start()) {
    Teardown();
    co_return ConnectFailure::kRefused;
  }
  asio::co_spawn(executor_, ReadLoop(shared_from_this()), asio::detached);
  asio::co_spawn(executor_, WriteLoop(shared_from_this()), asio::detached);
  asio::co_spawn(executor_, Watchdog(shared_from_this()), asio::detached);
  while (!ready_ && !dead_ && store::LoopNow() < deadline) {
    co_await settings_wake_.Wait(deadline);
  }
  if (ready_ && !dead_) co_return ConnectFailure::kNone;
  const bool timed_out = !dead_;
  Teardown();
  co_return timed_out ? ConnectFailure::kTimeout : ConnectFailure::kRefused;
}

bool Connection::Start() {
  nghttp2_session_callbacks* callbacks = nullptr;
  if (nghttp2_session_callbacks_new(&callbacks) != 0) return false;
  nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, &OnBeginHeaders);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, &OnHeader);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, &OnFrameRecv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, &OnDataChunk);
  nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, &OnFrameSend);
  nghttp2_session_callbacks_set_on_frame_not_send_callback(callbacks, &OnFrameNotSend);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, &OnStreamClose);
  nghttp2_option* option = nullptr;
  if (nghttp2_option_new(&option) != 0) {
    nghttp2_session_callbacks_del(callbacks);
    return false;
  }
  // Stream windows go back as callers read (Consume), not as bytes arrive.
  nghttp2_option_set_no_auto_window_update(option, 1);
  const int rv = nghttp2_session_client_new2(&session_, callbacks, this, option);
  nghttp2_option_del(option);
  nghttp2_session_callbacks_del(callbacks);
  if (rv != 0) {
    session_ = nullptr;
    return false;
  }
  const std::array<nghttp2_settings_entry, 4> settings{{
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, options_.stream_window_bytes},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, options_.max_header_list_bytes},
      {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
  }};
  return http2_detail::SubmitSettings(session_, settings, options_.connection_window_bytes);
}

std::size_t Connection::Room() const {
  if (!TakesStreams()) return 0;
  const std::size_t allowed = std::min<std::uint32_t>(
      nghttp2_session_get_remote_settings(session_, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS),
      options_.max_streams_per_connection);
  return streams_.size() < allowed ? allowed - streams_.size() : 0;
}

bool Connection::Submit(StreamState& s) {
  nghttp2_data_provider provider{};
  provider.read_callback = &ReadData;
  const std::int32_t id = nghttp2_submit_request(session_, nullptr, s.request.Get(),
                                                 s.request.size(),
                                                 s.has_body ? &provider : nullptr, nullptr);
  if (id < 0) {
    // Stream ids are used up: new streams need a new connection.
    terminating_ = true;
    nghttp2_session_terminate_session(session_, NGHTTP2_NO_ERROR);
    Kick();
    return false;
  }
  s.id = id;
  s.connection = shared_from_this();
  streams_.emplace(id, &s);
  Kick();
  return true;
}

void Connection::Detach(StreamState& s) {
  const auto it = streams_.find(s.id);
  if (it == streams_.end() || it->second != &s) return;
  it->second = nullptr;
  if (!dead_ && !s.local_reset) {
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s.id, NGHTTP2_CANCEL);
    Kick();
  }
}

void Connection::ResetStream(StreamState& s, std::uint32_t code) {
  if (dead_ || s.closed) return;
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s.id, code);
  Kick();
}

void Connection::Resume(StreamState& s) {
  if (dead_ || s.closed) return;
  nghttp2_session_resume_data(session_, s.id);
  Kick();
}

void Connection::Consume(StreamState& s, std::size_t n) {
  if (dead_ || s.closed) return;
  nghttp2_session_consume_stream(session_, s.id, n);
  Kick();  // a WINDOW_UPDATE may be due
}

StreamState* Connection::Find(std::int32_t id) const {
  const auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : it->second;
}

// ---------------------------------------------------------------------------
// nghttp2's callbacks: they record what arrived and wake whoever waits.

int Connection::OnBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
  auto& c = *static_cast<Connection*>(user_data);
  StreamState* s = c.Find(frame->hd.stream_id);
  if (s == nullptr) return 0;
  s->header_bytes = 0;
  // After the final header, a header block can only be the trailers
  // (nghttp2 files both a final header after a 1xx and trailers as
  // NGHTTP2_HCAT_HEADERS).
  s->in_trailers = s->head_done;
  if (!s->head_done) s->response = {};
  return 0;
}

int Connection::OnHeader(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name_data,
                         std::size_t name_size, const std::uint8_t* value_data,
                         std::size_t value_size, std::uint8_t, void* user_data) {
  auto& c = *static_cast<Connection*>(user_data);
  StreamState* s = c.Find(frame->hd.stream_id);
  if (s == nullptr) return 0;
  s->header_bytes += name_size + value_size + kFieldOverhead;
  // nghttp2 resets the stream (INTERNAL_ERROR).
  if (s->header_bytes > c.options_.max_header_list_bytes) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  const std::string_view name(reinterpret_cast<const char*>(name_data), name_size);
  const std::string_view value(reinterpret_cast<const char*>(value_data), value_size);
  if (s->in_trailers) {
    s->trailers.insert(name, value);
  } else if (name == ":status") {
    // nghttp2 has checked that it is three digits.
    unsigned status = 0;
    std::from_chars(value.data(), value.data() + value.size(), status);
    s->response.result(status);
  } else if (name.empty() || name[0] != ':') {
    s->response.insert(name, value);
  }
  return 0;
}

int Connection::OnFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
  auto& c = *static_cast<Connection*>(user_data);
  const bool end_stream = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  switch (frame->hd.type) {
    case NGHTTP2_HEADERS:
    case NGHTTP2_DATA: {
      StreamState* s = c.Find(frame->hd.stream_id);
      if (s == nullptr) return 0;
      if (frame->hd.type == NGHTTP2_HEADERS && !s->in_trailers &&
          s->response.result_int() >= 200) {
        s->head_done = true;
        s->no_body = end_stream;
        s->response.version(20);
      }
      if (end_stream) s->in_end = true;
      s->read_wake.Notify();
      return 0;
    }
    case NGHTTP2_SETTINGS:
      if ((frame->hd.flags & NGHTTP2_FLAG_ACK) != 0) return 0;
      if (!c.ready_) {
        c.ready_ = true;
        c.settings_wake_.Notify();
      } else if (c.owner_ != nullptr) {
        c.owner_->OnStreamEnd();  // the server may allow more streams now
      }
      return 0;
    case NGHTTP2_GOAWAY:
      // nghttp2 closes our streams above last_stream_id with REFUSED_STREAM.
      c.goaway_ = true;
      if (c.owner_ != nullptr) c.owner_->OnGoaway();
      return 0;
    default:
      return 0;
  }
}

int Connection::OnDataChunk(nghttp2_session* session, std::uint8_t, std::int32_t id,
                            const std::uint8_t* data, std::size_t size, void* user_data) {
  auto& c = *static_cast<Connection*>(user_data);
  // The connection's window goes back at once: only the stream's waits for
  // its reader.
  nghttp2_session_consume_connection(session, size);
  StreamState* s = c.Find(id);
  if (s == nullptr || s->local_reset) {
    nghttp2_session_consume_stream(session, id, size);
    return 0;
  }
  // At most the stream's window: nghttp2 enforces it.
  auto buffer = s->in.prepare(size);
  std::memcpy(buffer.data(), data, size);
  s->in.commit(size);
  s->read_wake.Notify();
  return 0;
}

int Connection::OnFrameSend(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
  auto& c = *static_cast<Connection*>(user_data);
  if (frame->hd.type == NGHTTP2_HEADERS) {
    if (StreamState* s = c.Find(frame->hd.stream_id)) s->headers_sent = true;
  }
  return 0;
}

int Connection::OnFrameNotSend(nghttp2_session*, const nghttp2_frame* frame, int,
                               void* user_data) {
  // A request header that could not go out (a GOAWAY came first): never
  // seen by the server.
  if (frame->hd.type == NGHTTP2_HEADERS) {
    static_cast<Connection*>(user_data)->EndStream(frame->hd.stream_id, NGHTTP2_REFUSED_STREAM);
  }
  return 0;
}

int Connection::OnStreamClose(nghttp2_session*, std::int32_t id, std::uint32_t error_code,
                              void* user_data) {
  static_cast<Connection*>(user_data)->EndStream(id, error_code);
  return 0;
}

ssize_t Connection::ReadData(nghttp2_session* session, std::int32_t id, std::uint8_t* buf,
                             std::size_t length, std::uint32_t* data_flags, nghttp2_data_source*,
                             void* user_data) {
  StreamState* s = static_cast<Connection*>(user_data)->Find(id);
  // Its handle went: the RST_STREAM is on its way.
  if (s == nullptr) return NGHTTP2_ERR_DEFERRED;
  return http2_detail::ReadBodySource(session, id, s->out, s->write_wake, buf, length, data_flags);
}

void Connection::EndStream(std::int32_t id, std::uint32_t error_code) {
  const auto it = streams_.find(id);
  if (it == streams_.end()) return;
  StreamState* s = it->second;
  streams_.erase(it);
  if (streams_.empty()) idle_since_ = store::LoopNow();
  if (s != nullptr) {
    s->closed = true;
    // RFC 9113 §8.7: a refused stream, or one above a GOAWAY's
    // last-stream-id (nghttp2 closes those with REFUSED_STREAM too), was not
    // processed; unless the server broke that rule and answered it first,
    // whose answer the caller may have started to relay.
    if (error_code == NGHTTP2_REFUSED_STREAM && !s->local_reset && !s->head_done) {
      s->refused = true;
    }
    if (error_code != NGHTTP2_NO_ERROR && s->reset_code == 0) s->reset_code = error_code;
    s->WakeAll();
  }
  if (owner_ != nullptr) owner_->OnStreamEnd();
}

// ---------------------------------------------------------------------------
// The loops.

void Connection::Feed(const std::uint8_t* data, std::size_t size) {
  if (nghttp2_session_mem_recv(session_, data, size) < 0) {
    Teardown();
    return;
  }
  Pull();
  Kick();
}

void Connection::Pull() {
  if (!dead_ && http2_detail::PullFrames(session_, pending_, options_.max_outbound_bytes) != 0) {
    Teardown();
  }
}

Task<void> Connection::ReadLoop(std::shared_ptr<Connection> /*keep_alive*/) {
  while (!dead_) {
    if (pending_.size() >= options_.max_outbound_bytes) {
      // The server does not take what we send: read nothing more from it
      // (the write's deadline ends this).
      co_await read_wake_.Wait(Clock::time_point::max());
      // A fresh reader reads before it waits: what arrived meanwhile raised
      // its (edge-triggered) event while no wait was there to take it.
      reader_ = http2_detail::FrameReader();
      continue;
    }
    // No deadline here: each stream's operations have their own, the
    // watchdog closes an idle connection.
    const http2_detail::FrameReader::Piece piece = co_await reader_.Next(stream_);
    if (piece.ec) break;
    Feed(piece.data, piece.size);
  }
  Teardown();
}

Task<void> Connection::WriteLoop(std::shared_ptr<Connection> /*keep_alive*/) {
  while (!dead_) {
    Pull();
    if (dead_) break;
    if (pending_.empty()) {
      // Both sides' GOAWAY (or ours after idling) and no stream left.
      if (nghttp2_session_want_read(session_) == 0 && nghttp2_session_want_write(session_) == 0) {
        break;
      }
      co_await write_wake_.Wait(Clock::time_point::max());
      continue;
    }
    writing_.swap(pending_);
    const ErrorCode ec = co_await http2_detail::WriteFrames(stream_, writing_, options_.write_timeout);
    writing_.clear();
    if (ec) break;
    read_wake_.Notify();
  }
  Teardown();
}

Task<void> Connection::Watchdog(std::shared_ptr<Connection> /*keep_alive*/) {
  while (!dead_) {
    const auto now = store::LoopNow();
    auto next = now + options_.idle_timeout;
    if (streams_.empty() && ready_ && !terminating_) {
      const auto idle_end = idle_since_ + options_.idle_timeout;
      if (now >= idle_end) {
        // GOAWAY; the writer closes the connection once it is sent.
        terminating_ = true;
        nghttp2_session_terminate_session(session_, NGHTTP2_NO_ERROR);
        Kick();
      } else {
        next = idle_end;
      }
    }
    watchdog_.expires_at(next);
    co_await watchdog_.async_wait(kUseTuple);
  }
}

void Connection::Teardown() {
  if (dead_) return;
  dead_ = true;
  const std::shared_ptr<Connection> keep = shared_from_this();
  Lowest(stream_).close();
  for (const auto& [id, s] : streams_) {
    if (s == nullptr) continue;
    s->closed = true;
    // A request the server never saw may be sent again.
    if (s->headers_sent) {
      s->lost = true;
    } else {
      s->refused = true;
    }
    s->WakeAll();
  }
  streams_.clear();
  write_wake_.Notify();
  read_wake_.Notify();
  settings_wake_.Notify();
  watchdog_.cancel();
  if (owner_ != nullptr) owner_->OnConnectionEnd(this);
}

}  // namespace http2_upstream_detail

using http2_upstream_detail::Connection;
using http2_upstream_detail::StreamState;

// ---------------------------------------------------------------------------
// Http2UpstreamStream

Http2UpstreamStream::Http2UpstreamStream() = default;
Http2UpstreamStream::Http2UpstreamStream(std::unique_ptr<StreamState> state)
    : state_(std::move(state)) {}
Http2UpstreamStream::Http2UpstreamStream(Http2UpstreamStream&&) noexcept = default;

Http2UpstreamStream& Http2UpstreamStream::operator=(Http2UpstreamStream&& other) noexcept {
  if (this != &other) {
    if (state_ && state_->connection) state_->connection->Detach(*state_);
    state_ = std::move(other.state_);
  }
  return *this;
}

Http2UpstreamStream::~Http2UpstreamStream() {
  if (state_ && state_->connection) state_->connection->Detach(*state_);
}

Task<ErrorCode> Http2UpstreamStream::WaitTaken(StreamState& s, Clock::time_point deadline) {
  for (;;) {
    if (s.out.data.size() == 0 && (!s.out.last || s.out.end_taken)) co_return ErrorCode{};
    if (s.refused) {
      // (GCC 12 lays the frame out wrongly for a co_await in an if's
      // condition: PR 106188's kind; hence the variable.)
      const bool sent_again = co_await s.session.Retry(s, deadline);
      if (sent_again) continue;
      co_return s.Failure();
    }
    if (s.closed || s.local_reset) co_return s.Failure();
    if (store::LoopNow() >= deadline) co_return ErrorCode(beast::error::timeout);
    co_await s.write_wake.Wait(deadline);
  }
}

Task<ErrorCode> Http2UpstreamStream::WriteBody(asio::const_buffer data, BodyEnd end,
                                               std::chrono::steady_clock::duration timeout) {
  if (!state_) co_return MakeErrorCode(Http2Errc::kWrongState);
  StreamState& s = *state_;
  if (!s.has_body || s.body_ended || s.writing) co_return MakeErrorCode(Http2Errc::kWrongState);
  s.writing = true;
  const auto deadline = store::LoopNow() + timeout;
  // What a retry sends again goes first.
  ErrorCode ec = co_await WaitTaken(s, deadline);
  if (!ec) {
    if (s.replayable) {
      const std::size_t max = s.session.options_.max_replay_bytes;
      if (s.replay.size() + data.size() <= max) {
        s.replay.append(static_cast<const char*>(data.data()), data.size());
      } else {
        s.replayable = false;
        std::string().swap(s.replay);
      }
    }
    s.out.data = data;
    s.out.last = end == BodyEnd::kLast;
    s.body_ended = s.out.last;
    if (s.connection) s.connection->Resume(s);
    ec = co_await WaitTaken(s, deadline);
  }
  // nghttp2 must not read the caller's buffer once this returns.
  if (ec) s.out.data = {};
  s.writing = false;
  co_return ec;
}

ErrorCode Http2UpstreamStream::EndBody(const Fields& trailers) {
  if (!state_) return MakeErrorCode(Http2Errc::kWrongState);
  StreamState& s = *state_;
  if (!s.has_body || s.body_ended || s.writing) return MakeErrorCode(Http2Errc::kWrongState);
  if (s.closed && !s.refused) return s.Failure();
  s.out.trailers.clear();
  for (const auto& field : trailers) {
    if (http2_detail::ConnectionSpecific(field.name_string())) continue;
    s.out.trailers.emplace_back(field.name_string(), field.value());
  }
  s.out.trailers_pending = !s.out.trailers.empty();
  s.out.last = true;
  s.body_ended = true;
  if (s.connection) s.connection->Resume(s);
  return {};
}

Task<ErrorCode> Http2UpstreamStream::ReadResponseHead(std::chrono::steady_clock::duration timeout) {
  if (!state_ || state_->reading) co_return MakeErrorCode(Http2Errc::kWrongState);
  StreamState& s = *state_;
  s.reading = true;
  const auto deadline = store::LoopNow() + timeout;
  ErrorCode ec;
  for (;;) {
    if (s.head_done) break;
    if (s.refused) {
      const bool sent_again = co_await s.session.Retry(s, deadline);
      if (sent_again) continue;
      ec = s.Failure();
      break;
    }
    if (s.closed || s.local_reset) {
      ec = s.Failure();
      break;
    }
    if (store::LoopNow() >= deadline) {
      ec = beast::error::timeout;
      break;
    }
    co_await s.read_wake.Wait(deadline);
  }
  s.reading = false;
  co_return ec;
}

http::response_header<Fields>& Http2UpstreamStream::response() { return state_->response; }

bool Http2UpstreamStream::response_has_body() const {
  return state_ && state_->head_done && !state_->no_body;
}

Task<Http2Read> Http2UpstreamStream::ReadBody(asio::mutable_buffer buffer,
                                              std::chrono::steady_clock::duration timeout) {
  if (!state_ || !state_->head_done || state_->reading) {
    co_return Http2Read{MakeErrorCode(Http2Errc::kWrongState)};
  }
  StreamState& s = *state_;
  s.reading = true;
  const auto deadline = store::LoopNow() + timeout;
  Http2Read result;
  for (;;) {
    if (s.in.size() > 0) {
      const std::size_t n = asio::buffer_copy(buffer, s.in.data());
      s.in.consume(n);
      if (s.connection) s.connection->Consume(s, n);
      result.bytes = n;
      result.end = s.in_end && s.in.size() == 0;
      break;
    }
    if (s.in_end) {
      result.end = true;
      break;
    }
    if (s.closed || s.local_reset) {
      result.ec = s.Failure();
      break;
    }
    if (store::LoopNow() >= deadline) {
      result.ec = beast::error::timeout;
      break;
    }
    co_await s.read_wake.Wait(deadline);
  }
  s.reading = false;
  co_return result;
}

const Fields& Http2UpstreamStream::trailers() const { return state_->trailers; }

void Http2UpstreamStream::Reset() {
  if (!state_ || state_->local_reset) return;
  StreamState& s = *state_;
  if (s.connection) s.connection->ResetStream(s, NGHTTP2_CANCEL);
  s.local_reset = true;
  if (s.reset_code == 0) s.reset_code = NGHTTP2_CANCEL;
  s.out.data = {};
  s.WakeAll();
}

std::uint32_t Http2UpstreamStream::reset_code() const { return state_ ? state_->reset_code : 0; }

std::string_view Http2UpstreamStream::server() const {
  return state_ ? state_->session.server_name() : std::string_view();
}

// ---------------------------------------------------------------------------
// Http2UpstreamConnection

// An open waiting for a free stream: queued while it waits, woken by
// Wake() (or its deadline).
struct Http2UpstreamConnection::Waiter {
  Waiter(Http2UpstreamConnection& owner, const Executor& executor, Clock::time_point deadline)
      : session(owner), timer(executor, deadline) {
    session.waiters_.push_back(this);
  }
  ~Waiter() {
    if (woken) return;
    auto& queue = session.waiters_;
    queue.erase(std::remove(queue.begin(), queue.end(), this), queue.end());
  }
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;

  Http2UpstreamConnection& session;
  Timer timer;
  bool woken = false;
};

Http2UpstreamConnection::Http2UpstreamConnection(UpstreamPool& connector, std::size_t server,
                                           Http2Transport transport,
                                           const Http2UpstreamOptions& options,
                                           Http2UpstreamStats& stats)
    : connector_(connector),
      server_(server),
      transport_(transport),
      options_(options),
      stats_(stats) {}

Http2UpstreamConnection::~Http2UpstreamConnection() {
  const auto connections = std::move(connections_);
  for (const auto& c : connections) {
    c->Orphan();
    c->Close();
  }
}

namespace {

// The request header as HTTP/2 fields (RFC 9113 §8.3.1).
void BuildRequest(const http::request_header<Fields>& head, Http2Transport transport,
                  std::string_view server, http2_detail::HeaderList& list) {
  list.Add(":method", head.method_string());
  list.Add(":scheme", transport == Http2Transport::kTls ? "https" : "http");
  const std::string_view host = head[http::field::host];
  list.Add(":authority", host.empty() ? server : host);
  list.Add(":path", head.target().empty() ? std::string_view("/") : std::string_view(head.target()));
  // Trailers are relayed to every client (in the last chunk for HTTP/1.1),
  // and gRPC servers refuse a call without this (nginx's grpc_pass sends
  // it on every request too). The client's own TE was hop-by-hop.
  list.Add("te", "trailers");
  for (const auto& field : head) {
    const std::string_view name = field.name_string();
    if (http2_detail::ConnectionSpecific(name) || http2_detail::IEquals(name, "host")) continue;
    list.Add(name, field.value());
  }
}

}  // namespace

Task<Http2OpenResult> Http2UpstreamConnection::Open(const http::request_header<Fields>& head,
                                                 Http2Body body,
                                                 std::chrono::steady_clock::duration connect_timeout) {
  Http2OpenResult result;
  result.server = server_name();
  if (head.method() == http::verb::connect) {
    result.failure = ConnectFailure::kRefused;
    co_return result;
  }
  const auto deadline = store::LoopNow() + connect_timeout;
  const Executor executor = co_await asio::this_coro::executor;
  auto state = std::make_unique<StreamState>(*this, executor);
  BuildRequest(head, transport_, server_name(), state->request);
  state->has_body = body == Http2Body::kFollows;
  result.failure = co_await Attach(*state, deadline);
  if (result.failure == ConnectFailure::kNone) {
    result.stream = Http2UpstreamStream(std::move(state));
  }
  co_return result;
}

Connection* Http2UpstreamConnection::WithRoom() const {
  // The oldest first: streams gather on as few connections as they can.
  for (const auto& c : connections_) {
    if (c->Room() > 0) return c.get();
  }
  return nullptr;
}

std::size_t Http2UpstreamConnection::Accepting() const {
  return static_cast<std::size_t>(std::count_if(
      connections_.begin(), connections_.end(), [](const auto& c) { return c->TakesStreams(); }));
}

Task<ConnectFailure> Http2UpstreamConnection::Attach(StreamState& s, Clock::time_point deadline) {
  bool counted_wait = false;
  for (;;) {
    if (Connection* c = WithRoom()) {
      if (c->Submit(s)) {
        ++s.attempts;
        ++stats_.streams;
        co_return ConnectFailure::kNone;
      }
      continue;  // that connection takes no more streams now
    }
    if (connecting_ == 0 && Accepting() < options_.max_connections_per_server) {
      const ConnectFailure failure = co_await Connect(deadline);
      if (failure != ConnectFailure::kNone) co_return failure;
      continue;
    }
    if (store::LoopNow() >= deadline) co_return ConnectFailure::kTimeout;
    if (waiters_.size() >= options_.max_waiting_opens) co_return ConnectFailure::kRefused;
    if (!counted_wait) {
      counted_wait = true;
      ++stats_.waits;
    }
    const std::uint64_t failures = connect_failures_;
    const Executor executor = co_await asio::this_coro::executor;
    Waiter waiter(*this, executor, deadline);
    co_await waiter.timer.async_wait(kUseTuple);
    // The connection it waited for could not be made.
    if (connect_failures_ != failures && WithRoom() == nullptr) co_return last_failure_;
  }
}

Task<bool> Http2UpstreamConnection::Retry(StreamState& s, Clock::time_point deadline) {
  // Refused once more, or its body is no longer all here: it stays failed.
  if (s.attempts >= kMaxAttempts || !s.replayable || s.local_reset) {
    s.refused = false;
    co_return false;
  }
  s.Rewind();
  ++stats_.retries;
  const ConnectFailure failure = co_await Attach(s, deadline);
  if (failure != ConnectFailure::kNone) {
    s.closed = true;
    s.lost = true;
    co_return false;
  }
  co_return true;
}

Task<ConnectFailure> Http2UpstreamConnection::Connect(Clock::time_point deadline) {
  ++connecting_;
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - store::LoopNow());
  // (GCC 12 destroys temporaries twice when a ?: sits in a co_await
  // expression.)
  const Alpn alpn = transport_ == Http2Transport::kTls ? Alpn::kH2 : Alpn::kNone;
  ConnectResult cr =
      co_await connector_.Connect(server_, std::max<std::int64_t>(1, left.count()), alpn);
  ConnectFailure failure = cr.failure;
  std::shared_ptr<Connection> c;
  if (cr.connection) {
    if (transport_ == Http2Transport::kTls && !NegotiatedH2(cr.connection->stream)) {
      spdlog::warn("upstream \"{}\" ({}) did not agree to HTTP/2 (ALPN h2)", connector_.name(),
                   server_name());
      connector_.MarkDown(server_);
      failure = ConnectFailure::kRefused;
    } else {
      c = std::make_shared<Connection>(std::move(cr.connection->stream), options_, this);
      failure = co_await c->Handshake(deadline);
      if (failure != ConnectFailure::kNone) connector_.MarkDown(server_);
    }
  }
  --connecting_;
  if (failure != ConnectFailure::kNone) {
    ++connect_failures_;
    last_failure_ = failure;
    Wake(waiters_.size());
    co_return failure;
  }
  connections_.push_back(c);
  ++stats_.connections;
  // The caller takes one of its streams and as many waiters the others;
  // one more finds none left and opens the next connection (below the
  // cap) rather than wait for a stream to end.
  Wake(c->Room());
  co_return ConnectFailure::kNone;
}

void Http2UpstreamConnection::Wake(std::size_t n) {
  for (; n > 0 && !waiters_.empty(); --n) {
    Waiter* waiter = waiters_.front();
    waiters_.pop_front();
    waiter->woken = true;
    waiter->timer.cancel();
  }
}

void Http2UpstreamConnection::OnGoaway() {
  ++stats_.goaways;
  // Its streams go elsewhere now: a waiter may open a connection.
  Wake(1);
}

void Http2UpstreamConnection::OnConnectionEnd(Connection* connection) {
  std::erase_if(connections_, [connection](const auto& c) { return c.get() == connection; });
  Wake(1);
}

}  // namespace tollgate::gateway
