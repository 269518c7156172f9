#include "gateway/http2/server_callbacks.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <string_view>

#include "gateway/http2/connection.h"
#include "gateway/http2/frame_io.h"

namespace tollgate::gateway {

namespace {

// SETTINGS_MAX_CONCURRENT_STREAMS's initial value: no limit (RFC 9113 §6.5.2).
constexpr std::uint32_t kNoStreamLimit = 0xffffffff;
// RFC 7541 §4.1: each field's size in a header list.
constexpr std::size_t kFieldOverhead = 32;
// The dynamic table of our HPACK encoder (responses), below RFC 7541's
// 4,096: the fields that repeat on every response (server, content-type,
// cache-control) still go as one-byte indexes, while the values that change
// with each one (date, request ids, rate-limit counters), which fill any
// table on a long-lived connection, are kept for a quarter of the memory.
constexpr std::size_t kDeflateTableBytes = 1024;

Http2Stream* StreamOf(nghttp2_session* session, std::int32_t id) {
  return static_cast<Http2Stream*>(nghttp2_session_get_stream_user_data(session, id));
}

}  // namespace

int Http2Callbacks::NewSession(nghttp2_session** session, const Http2Options& options,
                               Http2Connection* connection) {
  nghttp2_session_callbacks* raw = nullptr;
  if (const int rv = nghttp2_session_callbacks_new(&raw); rv != 0) return rv;
  const std::unique_ptr<nghttp2_session_callbacks, void (*)(nghttp2_session_callbacks*)> callbacks(
      raw, &nghttp2_session_callbacks_del);
  nghttp2_session_callbacks_set_on_begin_frame_callback(raw, &OnBeginFrame);
  nghttp2_session_callbacks_set_on_begin_headers_callback(raw, &OnBeginHeaders);
  nghttp2_session_callbacks_set_on_header_callback(raw, &OnHeader);
  nghttp2_session_callbacks_set_on_invalid_header_callback(raw, &OnInvalidHeader);
  nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(raw, &OnInvalidFrame);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(raw, &OnDataChunk);
  nghttp2_session_callbacks_set_on_frame_recv_callback(raw, &OnFrameRecv);
  nghttp2_session_callbacks_set_on_frame_send_callback(raw, &OnFrameSend);
  nghttp2_session_callbacks_set_on_stream_close_callback(raw, &OnStreamClose);
  nghttp2_option* raw_option = nullptr;
  if (const int rv = nghttp2_option_new(&raw_option); rv != 0) return rv;
  const std::unique_ptr<nghttp2_option, void (*)(nghttp2_option*)> option(raw_option,
                                                                          &nghttp2_option_del);
  // Windows go back as handlers read (ReadBody), not as bytes arrive.
  nghttp2_option_set_no_auto_window_update(raw_option, 1);
  nghttp2_option_set_no_closed_streams(raw_option, 1);
  nghttp2_option_set_max_outbound_ack(raw_option, options.max_outbound_ack);
  nghttp2_option_set_max_continuations(raw_option, options.max_continuations);
  nghttp2_option_set_max_deflate_dynamic_table_size(raw_option, kDeflateTableBytes);
  // nghttp2's own reset limit (INTERNAL_ERROR) stays behind ours
  // (ENHANCE_YOUR_CALM), which counts the same frames and more.
  nghttp2_option_set_stream_reset_rate_limit(raw_option, 2ULL * options.reset_burst,
                                             2ULL * options.resets_per_second);
  if (const int rv = nghttp2_session_server_new2(session, raw, connection, raw_option); rv != 0) {
    *session = nullptr;
    return rv;
  }
  // Once the peer has acknowledged SETTINGS, nghttp2 makes a stream beyond
  // MAX_CONCURRENT_STREAMS a connection error, which drops the streams in
  // flight: nghttp2 is given no limit, the peer is told ours (the
  // connection rewrites the frame), and OnBeginHeaders refuses the streams
  // beyond it.
  const std::array<nghttp2_settings_entry, 4> settings{{
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, kNoStreamLimit},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, options.stream_window_bytes},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, options.max_header_list_bytes},
      {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
  }};
  if (!http2_detail::SubmitSettings(*session, settings, options.connection_window_bytes)) {
    nghttp2_session_del(*session);
    *session = nullptr;
    return NGHTTP2_ERR_NOMEM;
  }
  return 0;
}

Http2Connection& Http2Callbacks::Self(void* user_data) {
  return *static_cast<Http2Connection*>(user_data);
}

int Http2Callbacks::OnBeginFrame(nghttp2_session* session, const nghttp2_frame_hd* hd,
                                 void* user_data) {
  Http2Connection& c = Self(user_data);
  switch (hd->type) {
    case NGHTTP2_HEADERS:
      // nghttp2 ignores a HEADERS frame on a stream id the peer has used
      // before unless it knows the stream still (it forgets closed ones).
      if (hd->stream_id % 2 == 1) {
        if (hd->stream_id > c.highest_stream_) {
          c.highest_stream_ = hd->stream_id;
        } else if (nghttp2_session_find_stream(session, hd->stream_id) == nullptr &&
                   !c.flood_.ResetLately(hd->stream_id)) {
          c.Terminate(Http2CloseReason::kProtocolError, NGHTTP2_PROTOCOL_ERROR);
        }
      }
      break;
    case NGHTTP2_PING:
    case NGHTTP2_SETTINGS:
    case NGHTTP2_PRIORITY:
      if (!c.flood_.ControlFrame(c.now_)) c.Calm(Http2CloseReason::kControlFlood);
      break;
    default:
      break;
  }
  return 0;
}

int Http2Callbacks::OnBeginHeaders(nghttp2_session* session, const nghttp2_frame* frame,
                                   void* user_data) {
  Http2Connection& c = Self(user_data);
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
    return 0;
  }
  const std::int32_t id = frame->hd.stream_id;
  // Streams whose handlers still run count, reset or not, unless their
  // response has ended.
  if (c.terminating_ || c.streams_.size() - c.finished_ >= c.options_.max_concurrent_streams) {
    ++c.stats_.refused;
    nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM);
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  auto stream = std::unique_ptr<Http2Stream>(new Http2Stream(c, id));
  nghttp2_session_set_stream_user_data(session, id, stream.get());
  c.streams_.emplace(id, std::move(stream));
  return 0;
}

int Http2Callbacks::OnHeader(nghttp2_session* session, const nghttp2_frame* frame,
                             const std::uint8_t* name_data, std::size_t name_size,
                             const std::uint8_t* value_data, std::size_t value_size, std::uint8_t,
                             void* user_data) {
  Http2Connection& c = Self(user_data);
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  Http2Stream* s = StreamOf(session, frame->hd.stream_id);
  if (s == nullptr) return 0;
  const std::string_view name(reinterpret_cast<const char*>(name_data), name_size);
  const std::string_view value(reinterpret_cast<const char*>(value_data), value_size);
  s->header_bytes_ += name_size + value_size + kFieldOverhead;
  const bool trailer = frame->headers.cat != NGHTTP2_HCAT_REQUEST;
  if (s->header_bytes_ > c.options_.max_header_list_bytes) {
    // Failing here makes nghttp2 decode the rest of the block without
    // this callback and without its own field checks (HPACK's state
    // needs the decoding; a reference to a stored value then costs a
    // table lookup, not a pass over the value), and reset the stream.
    if (trailer) {
      c.CountPeerFault();
      c.CountOversizedHeader();
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, s->id_, NGHTTP2_ENHANCE_YOUR_CALM);
    } else {
      c.RespondHeaderTooLarge(*s);
    }
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  if (trailer) {
    s->trailers_.insert(name, value);
    return 0;
  }
  // nghttp2 has checked the pseudo-header fields (each once, before the
  // others, only known ones, :path and :method present).
  if (!name.empty() && name[0] == ':') {
    if (name == ":method") {
      s->method_.assign(value);
    } else if (name == ":path") {
      s->path_.assign(value);
    } else if (name == ":authority") {
      s->authority_.assign(value);
    } else if (name == ":scheme") {
      s->scheme_.assign(value);
    }
    return 0;
  }
  if (name == "host") {
    s->host_.assign(value);
  } else if (name == "cookie") {
    if (!s->cookie_.empty()) s->cookie_.append("; ");
    s->cookie_.append(value);
  } else {
    s->request_.insert(name, value);
  }
  return 0;
}

// nghttp2 ignores fields with invalid characters; RFC 9113 §8.2.1 makes
// such a request malformed.
int Http2Callbacks::OnInvalidHeader(nghttp2_session*, const nghttp2_frame*, const std::uint8_t*,
                                    std::size_t, const std::uint8_t*, std::size_t, std::uint8_t,
                                    void*) {
  return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
}

int Http2Callbacks::OnInvalidFrame(nghttp2_session*, const nghttp2_frame* frame, int,
                                   void* user_data) {
  Http2Connection& c = Self(user_data);
  if (frame->hd.type == NGHTTP2_HEADERS) ++c.stats_.malformed;
  c.CountPeerFault();
  return 0;
}

int Http2Callbacks::OnDataChunk(nghttp2_session* session, std::uint8_t, std::int32_t id,
                                const std::uint8_t* data, std::size_t size, void* user_data) {
  // The connection's window goes back at once: only the stream's waits
  // for its handler.
  nghttp2_session_consume_connection(session, size);
  Http2Stream* s = StreamOf(session, id);
  if (s == nullptr || s->handler_ == Http2Stream::Handler::kDone || s->Gone() ||
      s->header_too_large_) {
    nghttp2_session_consume_stream(session, id, size);
    if (s != nullptr && s->discarding_ && !s->Gone()) {
      s->discarded_ += size;
      if (s->discarded_ > Self(user_data).options_.discard_bytes) {
        Self(user_data).EndDiscard(*s);
      }
    }
    return 0;
  }
  // At most the stream's window: nghttp2 enforces it.
  auto buffer = s->in_.prepare(size);
  std::memcpy(buffer.data(), data, size);
  s->in_.commit(size);
  s->read_wake_.Notify();
  return 0;
}

int Http2Callbacks::OnFrameRecv(nghttp2_session* session, const nghttp2_frame* frame,
                                void* user_data) {
  Http2Connection& c = Self(user_data);
  const std::int32_t id = frame->hd.stream_id;
  const bool end_stream = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  switch (frame->hd.type) {
    case NGHTTP2_HEADERS: {
      Http2Stream* s = StreamOf(session, id);
      if (s == nullptr) return 0;
      if (end_stream) {
        s->in_end_ = true;
        s->read_wake_.Notify();
      }
      if (frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
        s->has_body_ = !end_stream;
        c.Dispatch(*s);
      }
      return 0;
    }
    case NGHTTP2_DATA: {
      const std::size_t payload = frame->hd.length - frame->data.padlen;
      if (payload == 0 && !end_stream && !c.flood_.ControlFrame(c.now_)) {
        c.Calm(Http2CloseReason::kControlFlood);
      }
      if (end_stream) {
        if (Http2Stream* s = StreamOf(session, id)) {
          s->in_end_ = true;
          s->read_wake_.Notify();
        }
      }
      return 0;
    }
    case NGHTTP2_SETTINGS:
      // A smaller table: nghttp2's next header block starts with the
      // update, which a decoder may insist on (RFC 7541 §4.2). nghttp2's
      // encoder uses at most the default size.
      for (std::size_t i = 0; i < frame->settings.niv; ++i) {
        if (frame->settings.iv[i].settings_id != NGHTTP2_SETTINGS_HEADER_TABLE_SIZE) continue;
        const std::uint32_t size =
            std::min<std::uint32_t>(frame->settings.iv[i].value, NGHTTP2_DEFAULT_HEADER_TABLE_SIZE);
        if (size < c.peer_table_size_) c.table_size_update_due_ = true;
        c.peer_table_size_ = size;
      }
      return 0;
    case NGHTTP2_RST_STREAM:
      ++c.stats_.peer_resets;
      if (!c.flood_.PeerFault(c.now_)) c.Calm(Http2CloseReason::kRapidReset);
      return 0;
    case NGHTTP2_PING:
      // The ACK of Shutdown()'s PING: streams the peer opened before it
      // saw the notice have arrived.
      if ((frame->hd.flags & NGHTTP2_FLAG_ACK) != 0 && c.notice_sent_ && !c.final_goaway_) {
        c.final_goaway_ = true;
        nghttp2_submit_goaway(session, NGHTTP2_FLAG_NONE,
                              nghttp2_session_get_last_proc_stream_id(session), NGHTTP2_NO_ERROR,
                              nullptr, 0);
      }
      return 0;
    default:
      return 0;
  }
}

int Http2Callbacks::OnFrameSend(nghttp2_session* session, const nghttp2_frame* frame,
                                void* user_data) {
  if (frame->hd.type == NGHTTP2_RST_STREAM) {
    Self(user_data).flood_.SentReset(frame->hd.stream_id);
    return 0;
  }
  if (frame->hd.type == NGHTTP2_HEADERS) Self(user_data).table_size_update_due_ = false;
  if (frame->hd.type != NGHTTP2_DATA && frame->hd.type != NGHTTP2_HEADERS) return 0;
  if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) == 0) return 0;
  Http2Stream* s = StreamOf(session, frame->hd.stream_id);
  if (s == nullptr) return 0;
  s->response_end_sent_ = true;
  // The response is complete but the request is not.
  if (s->handler_ == Http2Stream::Handler::kDone && !s->in_end_) {
    Self(user_data).StartDiscard(*s);
  }
  return 0;
}

int Http2Callbacks::OnStreamClose(nghttp2_session* session, std::int32_t id,
                                  std::uint32_t error_code, void* user_data) {
  Http2Connection& c = Self(user_data);
  Http2Stream* s = StreamOf(session, id);
  if (s == nullptr) return 0;
  nghttp2_session_set_stream_user_data(session, id, nullptr);
  c.CloseStream(*s, error_code);
  return 0;
}

ssize_t Http2Callbacks::ReadData(nghttp2_session* session, std::int32_t id, std::uint8_t* buf,
                                 std::size_t length, std::uint32_t* data_flags,
                                 nghttp2_data_source* source, void*) {
  auto* s = static_cast<Http2Stream*>(source->ptr);
  return http2_detail::ReadBodySource(session, id, s->out_, s->write_wake_, buf, length,
                                      data_flags);
}

}  // namespace tollgate::gateway
