#include "gateway/http2/upstream_link.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <exception>
#include <string_view>
#include <utility>

#include "base/loop_time.h"
#include "gateway/http2/frame_io.h"

namespace tollgate::gateway::http2_upstream_detail {

namespace {

// RFC 7541 §4.1: each field's size in a header list.
constexpr std::size_t kFieldOverhead = 32;

}  // namespace

// nghttp2's callbacks: they record what arrived and wake whoever waits.
struct LinkCallbacks {
  static int OnBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    auto& c = *static_cast<Link*>(user_data);
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

  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name_data,
                      std::size_t name_size, const std::uint8_t* value_data, std::size_t value_size,
                      std::uint8_t, void* user_data) {
    auto& c = *static_cast<Link*>(user_data);
    StreamState* s = c.Find(frame->hd.stream_id);
    if (s == nullptr) return 0;
    s->header_bytes += name_size + value_size + kFieldOverhead;
    // nghttp2 resets the stream (INTERNAL_ERROR).
    if (s->header_bytes > c.options_.max_header_list_bytes)
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
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

  static int OnFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    auto& c = *static_cast<Link*>(user_data);
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

  static int OnDataChunk(nghttp2_session* session, std::uint8_t, std::int32_t id,
                         const std::uint8_t* data, std::size_t size, void* user_data) {
    auto& c = *static_cast<Link*>(user_data);
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

  static int OnFrameSend(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    auto& c = *static_cast<Link*>(user_data);
    if (frame->hd.type == NGHTTP2_HEADERS) {
      if (StreamState* s = c.Find(frame->hd.stream_id)) s->headers_sent = true;
    }
    return 0;
  }

  static int OnFrameNotSend(nghttp2_session*, const nghttp2_frame* frame, int, void* user_data) {
    // A request header that could not go out (a GOAWAY came first): never
    // seen by the server.
    if (frame->hd.type == NGHTTP2_HEADERS) {
      static_cast<Link*>(user_data)->EndStream(frame->hd.stream_id, NGHTTP2_REFUSED_STREAM);
    }
    return 0;
  }

  static int OnStreamClose(nghttp2_session*, std::int32_t id, std::uint32_t error_code,
                           void* user_data) {
    static_cast<Link*>(user_data)->EndStream(id, error_code);
    return 0;
  }

  static ssize_t ReadData(nghttp2_session* session, std::int32_t id, std::uint8_t* buf,
                          std::size_t length, std::uint32_t* data_flags, nghttp2_data_source*,
                          void* user_data) {
    StreamState* s = static_cast<Link*>(user_data)->Find(id);
    // Its handle went: the RST_STREAM is on its way.
    if (s == nullptr) return NGHTTP2_ERR_DEFERRED;
    return http2_detail::ReadBodySource(session, id, s->out, s->write_wake, buf, length,
                                        data_flags);
  }
};

Link::Link(AnyStream stream, const Http2UpstreamOptions& options, Http2UpstreamConnection* owner)
    : OwnedStream(std::move(stream)),
      Endpoint(OwnedStream::stream,
               {options.max_outbound_bytes, options.write_timeout, options.idle_timeout}),
      options_(options),
      owner_(owner),
      settings_wake_(executor_) {}

Task<ConnectFailure> Link::Handshake(Clock::time_point deadline) {
  idle_since_ = store::LoopNow();
  if (!Start()) {
    Teardown();
    co_return ConnectFailure::kRefused;
  }
  // Each loop holds the link until it ends.
  asio::co_spawn(executor_, ReadLoop(), [keep = shared_from_this()](const std::exception_ptr&) {});
  StartLoops(shared_from_this());
  while (!ready_ && !dead_ && store::LoopNow() < deadline) {
    co_await settings_wake_.Wait(deadline);
  }
  if (ready_ && !dead_) co_return ConnectFailure::kNone;
  const bool timed_out = !dead_;
  Teardown();
  co_return timed_out ? ConnectFailure::kTimeout : ConnectFailure::kRefused;
}

bool Link::Start() {
  nghttp2_session_callbacks* callbacks = nullptr;
  if (nghttp2_session_callbacks_new(&callbacks) != 0) return false;
  nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks,
                                                          &LinkCallbacks::OnBeginHeaders);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, &LinkCallbacks::OnHeader);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, &LinkCallbacks::OnFrameRecv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, &LinkCallbacks::OnDataChunk);
  nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, &LinkCallbacks::OnFrameSend);
  nghttp2_session_callbacks_set_on_frame_not_send_callback(callbacks,
                                                           &LinkCallbacks::OnFrameNotSend);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, &LinkCallbacks::OnStreamClose);
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

std::size_t Link::Room() const {
  if (!TakesStreams()) return 0;
  const std::size_t allowed = std::min<std::uint32_t>(
      nghttp2_session_get_remote_settings(session_, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS),
      options_.max_streams_per_connection);
  return streams_.size() < allowed ? allowed - streams_.size() : 0;
}

bool Link::Submit(StreamState& s) {
  nghttp2_data_provider provider{};
  provider.read_callback = &LinkCallbacks::ReadData;
  const std::int32_t id =
      nghttp2_submit_request(session_, nullptr, s.request.Get(), s.request.size(),
                             s.has_body ? &provider : nullptr, nullptr);
  if (id < 0) {
    // Stream ids are used up: new streams need a new connection.
    EndSession(NGHTTP2_NO_ERROR);
    return false;
  }
  s.id = id;
  s.connection = shared_from_this();
  streams_.emplace(id, &s);
  Kick();
  return true;
}

void Link::Detach(StreamState& s) {
  const auto it = streams_.find(s.id);
  if (it == streams_.end() || it->second != &s) return;
  it->second = nullptr;
  if (!dead_ && !s.local_reset) {
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s.id, NGHTTP2_CANCEL);
    Kick();
  }
}

void Link::ResetStream(StreamState& s, std::uint32_t code) {
  if (dead_ || s.closed) return;
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s.id, code);
  Kick();
}

void Link::Resume(StreamState& s) {
  if (dead_ || s.closed) return;
  nghttp2_session_resume_data(session_, s.id);
  Kick();
}

void Link::Consume(StreamState& s, std::size_t n) {
  if (dead_ || s.closed) return;
  nghttp2_session_consume_stream(session_, s.id, n);
  Kick();  // a WINDOW_UPDATE may be due
}

StreamState* Link::Find(std::int32_t id) const {
  const auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : it->second;
}

void Link::EndStream(std::int32_t id, std::uint32_t error_code) {
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

void Link::Feed(const std::uint8_t* data, std::size_t size) {
  if (nghttp2_session_mem_recv(session_, data, size) < 0) {
    Teardown();
    return;
  }
  Pull();
  Kick();
}

void Link::Teardown() {
  if (dead_) return;
  dead_ = true;
  const std::shared_ptr<Link> keep = shared_from_this();
  CloseSocket();
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
  settings_wake_.Notify();
  if (owner_ != nullptr) owner_->OnConnectionEnd(this);
}

}  // namespace tollgate::gateway::http2_upstream_detail
