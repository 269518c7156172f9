#include "gateway/http2/connection.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <array>
#include <boost/asio/post.hpp>
#include <charconv>
#include <cstring>

#include "gateway/http2/frame_io.h"
#include "gateway/http2/header_list.h"
#include "gateway/io/linger.h"
#include "base/loop_time.h"

namespace tollgate::gateway {

namespace {

using Clock = std::chrono::steady_clock;
using http2_detail::ConnectionSpecific;
using http2_detail::HeaderList;
using http2_detail::IEquals;

// After the last frame, what the peer still sends is read and dropped for
// at most this long (and this much) before the socket is closed: closing
// with unread bytes makes the kernel send RST, which may destroy the
// GOAWAY before the peer has read it.
constexpr auto kLingerTime = std::chrono::seconds(1);
constexpr std::size_t kLingerBytes = 1 << 20;
// Shutdown(): the final GOAWAY follows the notice after a PING round trip,
// or after this long without the PING's ACK.
constexpr auto kGoawayGrace = std::chrono::seconds(1);
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

class Http2ErrorCategory final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "http2"; }
  std::string message(int ev) const override {
    switch (static_cast<Http2Errc>(ev)) {
      case Http2Errc::kStreamReset:
        return "HTTP/2 stream reset";
      case Http2Errc::kConnectionClosed:
        return "HTTP/2 connection closed";
      case Http2Errc::kWrongState:
        return "not allowed in the HTTP/2 stream's state";
    }
    return "unknown HTTP/2 error";
  }
};

// `fields` into `list` without copying them (the list is submitted before
// they change): a name Beast knows comes from its lower-case table.
void AddFields(const Fields& fields, HeaderList& list, bool no_content_length) {
  for (const auto& field : fields) {
    const http::field known = field.name();
    if (known == http::field::unknown) {
      list.AddView(field.name_string(), field.value());
      continue;
    }
    if (ConnectionSpecific(known)) continue;
    if (no_content_length && known == http::field::content_length) continue;
    list.AddStaticName(http2_detail::LowerName(known), field.value());
  }
}

Http2Stream* StreamOf(nghttp2_session* session, std::int32_t id) {
  return static_cast<Http2Stream*>(nghttp2_session_get_stream_user_data(session, id));
}

}  // namespace

// ---------------------------------------------------------------------------
// Free functions and helpers.

PrefaceMatch MatchHttp2Preface(std::string_view bytes) {
  const std::size_t n = std::min(bytes.size(), kHttp2Preface.size());
  if (bytes.substr(0, n) != kHttp2Preface.substr(0, n)) return PrefaceMatch::kNo;
  return n == kHttp2Preface.size() ? PrefaceMatch::kYes : PrefaceMatch::kPrefix;
}

const boost::system::error_category& Http2Category() {
  static const Http2ErrorCategory category;
  return category;
}

ErrorCode MakeErrorCode(Http2Errc e) { return ErrorCode(static_cast<int>(e), Http2Category()); }

std::string_view ToString(Http2CloseReason reason) {
  switch (reason) {
    case Http2CloseReason::kOpen:
      return "open";
    case Http2CloseReason::kDone:
      return "done";
    case Http2CloseReason::kPeerClosed:
      return "peer_closed";
    case Http2CloseReason::kIdle:
      return "idle";
    case Http2CloseReason::kClosed:
      return "closed";
    case Http2CloseReason::kRapidReset:
      return "rapid_reset";
    case Http2CloseReason::kControlFlood:
      return "control_flood";
    case Http2CloseReason::kHeaderFlood:
      return "header_flood";
    case Http2CloseReason::kProtocolError:
      return "protocol_error";
    case Http2CloseReason::kIoError:
      return "io_error";
  }
  return "unknown";
}

namespace http2_detail {

Task<void> Wakeup::Wait(std::chrono::steady_clock::time_point deadline) {
  if (notified_) {
    notified_ = false;
    co_return;
  }
  if (!timer_) timer_.emplace(executor_);
  timer_->expires_at(deadline);
  co_await timer_->async_wait(kUseTuple);
  notified_ = false;
}


}  // namespace http2_detail

// ---------------------------------------------------------------------------
// nghttp2's callbacks: they only record what arrived and wake whoever
// waits; handlers start after nghttp2_session_mem_recv has returned.

struct Http2Callbacks {
  static Http2Connection& Self(void* user_data) {
    return *static_cast<Http2Connection*>(user_data);
  }

  static int OnBeginFrame(nghttp2_session* session, const nghttp2_frame_hd* hd,
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

  static int OnBeginHeaders(nghttp2_session* session, const nghttp2_frame* frame,
                            void* user_data) {
    Http2Connection& c = Self(user_data);
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
      return 0;
    }
    const std::int32_t id = frame->hd.stream_id;
    // Streams whose handlers still run count, reset or not, unless their
    // response has ended.
    if (c.terminating_ ||
        c.streams_.size() - c.finished_ >= c.options_.max_concurrent_streams) {
      ++c.stats_.refused;
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM);
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    auto stream = std::unique_ptr<Http2Stream>(new Http2Stream(c, id));
    nghttp2_session_set_stream_user_data(session, id, stream.get());
    c.streams_.emplace(id, std::move(stream));
    return 0;
  }

  static int OnHeader(nghttp2_session* session, const nghttp2_frame* frame,
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
  static int OnInvalidHeader(nghttp2_session*, const nghttp2_frame*, const std::uint8_t*,
                             std::size_t, const std::uint8_t*, std::size_t, std::uint8_t,
                             void*) {
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }

  static int OnInvalidFrame(nghttp2_session*, const nghttp2_frame* frame, int,
                            void* user_data) {
    Http2Connection& c = Self(user_data);
    if (frame->hd.type == NGHTTP2_HEADERS) ++c.stats_.malformed;
    c.CountPeerFault();
    return 0;
  }

  static int OnDataChunk(nghttp2_session* session, std::uint8_t, std::int32_t id,
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

  static int OnFrameRecv(nghttp2_session* session, const nghttp2_frame* frame,
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
          const std::uint32_t size = std::min<std::uint32_t>(frame->settings.iv[i].value,
                                                             NGHTTP2_DEFAULT_HEADER_TABLE_SIZE);
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
                                nghttp2_session_get_last_proc_stream_id(session),
                                NGHTTP2_NO_ERROR, nullptr, 0);
        }
        return 0;
      default:
        return 0;
    }
  }

  static int OnFrameSend(nghttp2_session* session, const nghttp2_frame* frame,
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

  static int OnStreamClose(nghttp2_session* session, std::int32_t id, std::uint32_t error_code,
                           void* user_data) {
    Http2Connection& c = Self(user_data);
    Http2Stream* s = StreamOf(session, id);
    if (s == nullptr) return 0;
    nghttp2_session_set_stream_user_data(session, id, nullptr);
    c.CloseStream(*s, error_code);
    return 0;
  }

  static ssize_t ReadData(nghttp2_session* session, std::int32_t id, std::uint8_t* buf,
                          std::size_t length, std::uint32_t* data_flags,
                          nghttp2_data_source* source, void*) {
    auto* s = static_cast<Http2Stream*>(source->ptr);
    return http2_detail::ReadBodySource(session, id, s->out_, s->write_wake_, buf, length,
                                        data_flags);
  }
};

// ---------------------------------------------------------------------------
// Http2Stream

Http2Stream::Http2Stream(Http2Connection& connection, std::int32_t id)
    : connection_(connection),
      id_(id),
      read_wake_(connection.executor_),
      write_wake_(connection.executor_) {
  request_.version(20);
}

Http2Stream::~Http2Stream() {
  if (handle_ != nullptr) *handle_ = nullptr;
}

ErrorCode Http2Stream::StateError() const {
  if (connection_.dead_) return MakeErrorCode(Http2Errc::kConnectionClosed);
  return MakeErrorCode(Http2Errc::kStreamReset);
}

bool Http2Stream::Gone() const { return closed_ || local_reset_; }

void Http2Stream::WakeAll() {
  read_wake_.Notify();
  write_wake_.Notify();
}

Task<Http2Read> Http2Stream::ReadBody(asio::mutable_buffer buffer,
                                      std::chrono::steady_clock::duration timeout) {
  if (reading_) co_return Http2Read{MakeErrorCode(Http2Errc::kWrongState)};
  reading_ = true;
  const auto deadline = store::LoopNow() + timeout;
  Http2Read result;
  for (;;) {
    if (body_abandoned_) {
      result.ec = MakeErrorCode(Http2Errc::kStreamReset);
      break;
    }
    if (in_.size() > 0) {
      const std::size_t n = asio::buffer_copy(buffer, in_.data());
      in_.consume(n);
      if (!Gone()) {
        nghttp2_session_consume_stream(connection_.session_, id_, n);
        connection_.Kick();  // a WINDOW_UPDATE may be due
      }
      result.bytes = n;
      result.end = in_end_ && in_.size() == 0;
      break;
    }
    if (in_end_) {
      result.end = true;
      break;
    }
    if (Gone()) {
      result.ec = StateError();
      break;
    }
    if (store::LoopNow() >= deadline) {
      result.ec = beast::error::timeout;
      break;
    }
    co_await read_wake_.Wait(deadline);
  }
  reading_ = false;
  co_return result;
}

ErrorCode Http2Stream::SubmitResponse(const http::response_header<Fields>& head,
                                      Http2Body body) {
  if (response_submitted_) return MakeErrorCode(Http2Errc::kWrongState);
  if (Gone()) return StateError();
  const unsigned status = head.result_int();
  if (status < 100 || status > 999 || status == 101) return MakeErrorCode(Http2Errc::kWrongState);
  const bool interim = status < 200;
  const bool forbidden =
      request_.method() == http::verb::head || status == 204 || status == 304;
  const bool no_body = body == Http2Body::kNone || forbidden;
  char status_text[4];
  std::to_chars(status_text, status_text + 3, status);
  status_text[3] = '\0';
  HeaderList& list = connection_.headers_;
  list.Clear();
  list.AddStaticName(":status", std::string_view(status_text, 3));
  AddFields(head, list, interim || status == 204);
  const nghttp2_nv* nva = list.Get();
  nghttp2_session* session = connection_.session_;
  int rv;
  if (interim) {
    rv = nghttp2_submit_headers(session, NGHTTP2_FLAG_NONE, id_, nullptr, nva, list.size(),
                                nullptr);
  } else if (no_body) {
    rv = nghttp2_submit_response(session, id_, nva, list.size(), nullptr);
  } else {
    nghttp2_data_provider provider{};
    provider.source.ptr = this;
    provider.read_callback = &Http2Callbacks::ReadData;
    rv = nghttp2_submit_response(session, id_, nva, list.size(), &provider);
  }
  if (rv != 0) return MakeErrorCode(Http2Errc::kWrongState);
  if (!interim) {
    response_submitted_ = true;
    response_has_body_ = !no_body;
    body_suppressed_ = body == Http2Body::kFollows && forbidden;
    if (no_body) response_ended_ = true;
  }
  connection_.Kick();
  return {};
}

Task<ErrorCode> Http2Stream::WriteBody(asio::const_buffer data, BodyEnd end,
                                       std::chrono::steady_clock::duration timeout) {
  if (!response_submitted_ || writing_) co_return MakeErrorCode(Http2Errc::kWrongState);
  if (body_suppressed_) co_return ErrorCode{};  // HEAD, 204, 304: nothing to send
  if (!response_has_body_ || response_ended_) co_return MakeErrorCode(Http2Errc::kWrongState);
  if (Gone()) co_return StateError();
  writing_ = true;
  out_.data = data;
  out_.last = end == BodyEnd::kLast;
  response_ended_ = out_.last;
  nghttp2_session_resume_data(connection_.session_, id_);
  connection_.Kick();
  const auto deadline = store::LoopNow() + timeout;
  ErrorCode ec;
  bool stalled = false;  // holds one of the connection's stall places
  for (;;) {
    // Taken: all of it (and, for the last piece, the end of the body).
    if (out_.data.size() == 0 && (!out_.last || out_.end_taken)) break;
    if (Gone()) {
      ec = StateError();
      break;
    }
    if (store::LoopNow() >= deadline) {
      ec = beast::error::timeout;
      break;
    }
    if (!stalled && connection_.WindowClosed(*this)) {
      if (!connection_.TakeStallPlace(*this)) {
        ec = StateError();
        break;
      }
      stalled = true;
    }
    co_await write_wake_.Wait(deadline);
  }
  if (stalled) connection_.flood_.ReturnStallPlace();
  if (ec) {
    // nghttp2 must not read the caller's buffer once this returns.
    out_.data = {};
    out_.last = false;
    response_ended_ = false;
  }
  writing_ = false;
  co_return ec;
}

ErrorCode Http2Stream::SubmitTrailers(const Fields& trailers) {
  if (!response_submitted_ || writing_) return MakeErrorCode(Http2Errc::kWrongState);
  if (body_suppressed_) return {};
  if (!response_has_body_ || response_ended_) return MakeErrorCode(Http2Errc::kWrongState);
  if (Gone()) return StateError();
  out_.trailers.clear();
  for (const auto& field : trailers) {
    if (ConnectionSpecific(field.name_string())) continue;
    out_.trailers.emplace_back(field.name_string(), field.value());
  }
  out_.trailers_pending = true;
  out_.data = {};
  out_.last = true;
  response_ended_ = true;
  nghttp2_session_resume_data(connection_.session_, id_);
  connection_.Kick();
  return {};
}

void Http2Stream::Reset(Http2ErrorCode code) {
  if (Gone()) return;
  out_.data = {};
  nghttp2_submit_rst_stream(connection_.session_, NGHTTP2_FLAG_NONE, id_,
                            static_cast<std::uint32_t>(code));
  // Operations from now on fail; nghttp2 closes the stream (and the
  // connection forgets it) once the RST_STREAM is sent.
  local_reset_ = true;
  reset_code_ = static_cast<std::uint32_t>(code);
  WakeAll();
  connection_.Kick();
}

void Http2Stream::AbandonRequestBody() {
  body_abandoned_ = true;
  read_wake_.Notify();
}

void Http2Stream::OnCancel(std::function<void()> fn, Http2Stream** handle) {
  if (handle != nullptr) *handle = this;
  handle_ = handle;
  cancel_fn_ = std::move(fn);
  if (cancelled_) connection_.PostCancel(*this);
}

void Http2Stream::Release(Http2Stream* handle) {
  if (handle == nullptr) return;
  handle->cancel_fn_ = nullptr;
  handle->handle_ = nullptr;
}

// ---------------------------------------------------------------------------
// Http2Connection

Http2Connection::Http2Connection(AnyStream& stream, const Http2Options& options,
                                 Http2Handler handler)
    : stream_(stream),
      executor_(Lowest(stream).get_executor()),
      options_(options),
      handler_(std::move(handler)),
      flood_(options),
      write_wake_(executor_),
      read_wake_(executor_),
      done_wake_(executor_),
      watchdog_(executor_) {}

Http2Connection::~Http2Connection() {
  streams_.clear();
  if (session_ != nullptr) nghttp2_session_del(session_);
}

Http2Stream* Http2Connection::Find(std::int32_t id) {
  const auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : it->second.get();
}

bool Http2Connection::Start() {
  nghttp2_session_callbacks* callbacks = nullptr;
  if (nghttp2_session_callbacks_new(&callbacks) != 0) return false;
  nghttp2_session_callbacks_set_on_begin_frame_callback(callbacks, &Http2Callbacks::OnBeginFrame);
  nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks,
                                                          &Http2Callbacks::OnBeginHeaders);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, &Http2Callbacks::OnHeader);
  nghttp2_session_callbacks_set_on_invalid_header_callback(callbacks,
                                                           &Http2Callbacks::OnInvalidHeader);
  nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(callbacks,
                                                               &Http2Callbacks::OnInvalidFrame);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks,
                                                            &Http2Callbacks::OnDataChunk);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, &Http2Callbacks::OnFrameRecv);
  nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, &Http2Callbacks::OnFrameSend);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks,
                                                         &Http2Callbacks::OnStreamClose);
  nghttp2_option* option = nullptr;
  if (nghttp2_option_new(&option) != 0) {
    nghttp2_session_callbacks_del(callbacks);
    return false;
  }
  // Windows go back as handlers read (ReadBody), not as bytes arrive.
  nghttp2_option_set_no_auto_window_update(option, 1);
  nghttp2_option_set_no_closed_streams(option, 1);
  nghttp2_option_set_max_outbound_ack(option, options_.max_outbound_ack);
  nghttp2_option_set_max_continuations(option, options_.max_continuations);
  nghttp2_option_set_max_deflate_dynamic_table_size(option, kDeflateTableBytes);
  // nghttp2's own reset limit (INTERNAL_ERROR) stays behind ours
  // (ENHANCE_YOUR_CALM), which counts the same frames and more.
  nghttp2_option_set_stream_reset_rate_limit(option, 2ULL * options_.reset_burst,
                                             2ULL * options_.resets_per_second);
  const int rv = nghttp2_session_server_new2(&session_, callbacks, this, option);
  nghttp2_option_del(option);
  nghttp2_session_callbacks_del(callbacks);
  if (rv != 0) {
    session_ = nullptr;
    return false;
  }
  // Once the peer has acknowledged SETTINGS, nghttp2 makes a stream beyond
  // MAX_CONCURRENT_STREAMS a connection error, which drops the streams in
  // flight: nghttp2 is given no limit, the peer is told ours (rewritten in
  // the frame below), and OnBeginHeaders refuses the streams beyond it.
  const std::array<nghttp2_settings_entry, 4> settings{{
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, kNoStreamLimit},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, options_.stream_window_bytes},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, options_.max_header_list_bytes},
      {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
  }};
  if (!http2_detail::SubmitSettings(session_, settings, options_.connection_window_bytes)) {
    return false;
  }
  Pull();
  return http2_detail::RewriteSetting(pending_, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS,
                                      options_.max_concurrent_streams);
}

void Http2Connection::TaskDone() {
  --tasks_;
  done_wake_.Notify();
}

Task<void> Http2Connection::Run(asio::const_buffer already_read) {
  idle_since_ = store::LoopNow();
  if (!Start()) {
    Teardown(Http2CloseReason::kProtocolError);
    co_return;
  }
  tasks_ += 2;
  asio::co_spawn(executor_, WriteLoop(), asio::detached);
  asio::co_spawn(executor_, Watchdog(), asio::detached);
  if (shutdown_asked_) Shutdown();
  if (already_read.size() > 0) {
    Feed(static_cast<const std::uint8_t*>(already_read.data()), already_read.size());
  }
  while (!dead_ && !finishing_ && !fatal_) {
    if (pending_.size() >= options_.max_outbound_bytes) {
      // The peer does not take what we send: read nothing more from it
      // (the write's deadline ends this).
      co_await read_wake_.Wait(Clock::time_point::max());
      // A fresh reader reads before it waits: what arrived meanwhile raised
      // its (edge-triggered) event while no wait was there to take it.
      reader_ = http2_detail::FrameReader();
      continue;
    }
    // No deadline here: the watchdog closes an idle connection, and each
    // stream's operations have their own.
    const http2_detail::FrameReader::Piece piece = co_await reader_.Next(stream_);
    if (piece.ec) {
      if (!finishing_) {
        Teardown(piece.ec == asio::error::eof || piece.ec == ssl::error::stream_truncated
                     ? Http2CloseReason::kPeerClosed
                     : Http2CloseReason::kIoError);
      }
      break;
    }
    Feed(piece.data, piece.size);
  }
  // After a fatal error the writer sends what is pending, then finishes.
  while (!dead_ && !finishing_) co_await read_wake_.Wait(Clock::time_point::max());
  if (finishing_ && !dead_) {
    co_await Linger(Lowest(stream_), kLingerTime, kLingerBytes);
  }
  Teardown(Http2CloseReason::kDone);
  while (!Quiet()) co_await done_wake_.Wait(Clock::time_point::max());
}

void Http2Connection::Feed(const std::uint8_t* data, std::size_t size) {
  now_ = store::LoopNow();
  const ssize_t rv = nghttp2_session_mem_recv(session_, data, size);
  if (rv < 0) {
    Fail(static_cast<int>(rv));
  } else {
    DispatchReady();
  }
  Pull();
  Kick();
}

void Http2Connection::Pull() {
  if (fatal_ || dead_ || session_ == nullptr) return;
  if (const int error = http2_detail::PullFrames(session_, pending_, options_.max_outbound_bytes)) {
    Fail(error);
  }
}

void Http2Connection::Fail(int nghttp2_error) {
  if (fatal_) return;
  fatal_ = true;
  terminating_ = true;
  // Floods nghttp2 detects itself; anything else is the peer breaking the
  // protocol in a way nghttp2 cannot go on from.
  const bool flood =
      nghttp2_error == NGHTTP2_ERR_FLOODED || nghttp2_error == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS;
  SetReason(flood ? Http2CloseReason::kControlFlood : Http2CloseReason::kProtocolError);
  // The session may be in any state now: the GOAWAY is written by hand.
  const std::uint32_t code = flood ? NGHTTP2_ENHANCE_YOUR_CALM : NGHTTP2_PROTOCOL_ERROR;
  const std::uint32_t last =
      session_ != nullptr
          ? static_cast<std::uint32_t>(nghttp2_session_get_last_proc_stream_id(session_))
          : 0;
  const std::uint8_t goaway[17] = {
      0, 0, 8, NGHTTP2_GOAWAY, 0, 0, 0, 0, 0,
      static_cast<std::uint8_t>((last >> 24) & 0x7f), static_cast<std::uint8_t>(last >> 16),
      static_cast<std::uint8_t>(last >> 8), static_cast<std::uint8_t>(last),
      static_cast<std::uint8_t>(code >> 24), static_cast<std::uint8_t>(code >> 16),
      static_cast<std::uint8_t>(code >> 8), static_cast<std::uint8_t>(code)};
  pending_.append(reinterpret_cast<const char*>(goaway), sizeof goaway);
  Kick();
}

void Http2Connection::Terminate(Http2CloseReason reason, std::uint32_t code) {
  if (terminating_) return;
  terminating_ = true;
  SetReason(reason);
  nghttp2_session_terminate_session(session_, code);
  Kick();
}

void Http2Connection::Calm(Http2CloseReason reason) {
  Terminate(reason, NGHTTP2_ENHANCE_YOUR_CALM);
}

void Http2Connection::CountPeerFault() {
  if (!flood_.PeerFault(now_)) Calm(Http2CloseReason::kRapidReset);
}

void Http2Connection::CountOversizedHeader() {
  if (!flood_.OversizedHeader()) Calm(Http2CloseReason::kHeaderFlood);
}

void Http2Connection::Dispatch(Http2Stream& s) {
  // RFC 9113 §8.3.1: a Host that names another authority is malformed.
  if (!s.host_.empty() && !s.authority_.empty() && !IEquals(s.host_, s.authority_)) {
    ++stats_.malformed;
    CountPeerFault();
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s.id_, NGHTTP2_PROTOCOL_ERROR);
    return;
  }
  http::request_header<Fields>& req = s.request_;
  req.method_string(s.method_);
  const bool connect = req.method() == http::verb::connect;
  req.target(connect ? s.authority_ : s.path_);
  // OnHeader kept Host and Cookie out of the fields: inserted, not set (no
  // lookup for an earlier one).
  req.insert(http::field::host, s.host_.empty() ? s.authority_ : s.host_);
  if (!s.cookie_.empty()) req.insert(http::field::cookie, s.cookie_);
  s.method_.clear();
  s.path_.clear();
  s.cookie_.clear();
  s.header_bytes_ = 0;  // trailers have a budget of their own
  s.handler_ = Http2Stream::Handler::kReady;
  ready_.push_back(s.id_);
}

void Http2Connection::RespondHeaderTooLarge(Http2Stream& s) {
  ++stats_.header_too_large;
  CountPeerFault();
  CountOversizedHeader();
  s.header_too_large_ = true;
  s.handler_ = Http2Stream::Handler::kDone;
  s.dispatched_ = true;
  ++busy_;
  s.in_.clear();
  // Nothing more is read of the request: OnHeader has nghttp2 skip the
  // rest of the header block, which makes it reset the stream. A response
  // submitted to nghttp2 would be dropped by that reset, so the 431 is
  // written ahead of it by hand (unless a table size update is due first),
  // and the reset is ours (NO_ERROR: the answer is complete; nghttp2 then
  // adds no INTERNAL_ERROR of its own).
  s.in_end_ = true;
  s.response_submitted_ = true;
  s.response_ended_ = true;
  if (!table_size_update_due_) http2_detail::AppendStatusOnlyResponse(pending_, s.id_, "431");
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s.id_, NGHTTP2_NO_ERROR);
  if (header_too_large_fn_) header_too_large_fn_(s);
}

void Http2Connection::DispatchReady() {
  for (const std::int32_t id : ready_) {
    Http2Stream* s = Find(id);
    // Reset in the same read: no handler ever starts for it.
    if (s == nullptr || s->handler_ != Http2Stream::Handler::kReady) continue;
    if (terminating_ || s->closed_) {
      s->handler_ = Http2Stream::Handler::kDone;
      MaybeErase(*s);
      continue;
    }
    s->handler_ = Http2Stream::Handler::kRunning;
    s->dispatched_ = true;
    ++busy_;
    ++stats_.streams;
    ++tasks_;
    // OnHandlerDone from the completion, thrown or not: no wrapping
    // coroutine (one frame fewer per stream).
    try {
      asio::co_spawn(executor_, handler_(*s),
                     [this, s](const std::exception_ptr&) { OnHandlerDone(*s); });
    } catch (const std::exception&) {  // no handler started (out of memory)
      OnHandlerDone(*s);
    }
  }
  ready_.clear();
}

void Http2Connection::OnHandlerDone(Http2Stream& s) {
  s.handler_ = Http2Stream::Handler::kDone;
  s.cancel_fn_ = nullptr;
  s.out_.data = {};
  if (!s.closed_ && !s.local_reset_ && !dead_) {
    if (!s.response_ended_) {
      // Returned with its response unfinished.
      nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s.id_, NGHTTP2_INTERNAL_ERROR);
    } else if (s.response_end_sent_ && !s.in_end_) {
      StartDiscard(s);
    }
    // Unread body: the stream's window goes back with it.
    if (s.in_.size() > 0) {
      nghttp2_session_consume_stream(session_, s.id_, s.in_.size());
      s.in_.clear();
    }
    Kick();
  }
  MaybeErase(s);
  TaskDone();
}

void Http2Connection::CloseStream(Http2Stream& s, std::uint32_t error_code) {
  if (s.discarding_ && !s.local_reset_ && error_code == NGHTTP2_NO_ERROR && !dead_) {
    // The peer has ended the request it was still sending. Some clients
    // (curl 7.88) then wait to read something before they report the
    // response they have: a PING gives them that.
    nghttp2_submit_ping(session_, NGHTTP2_FLAG_NONE, nullptr);
    Kick();
  }
  s.closed_ = true;
  if (error_code != NGHTTP2_NO_ERROR && s.reset_code_ == 0) s.reset_code_ = error_code;
  if (s.response_end_sent_ && s.handler_ == Http2Stream::Handler::kRunning && !s.finished_) {
    s.finished_ = true;
    ++finished_;
  }
  if (!s.response_end_sent_ && s.handler_ == Http2Stream::Handler::kRunning) {
    s.cancelled_ = true;
    PostCancel(s);
  }
  s.WakeAll();
  MaybeErase(s);
}

void Http2Connection::StartDiscard(Http2Stream& s) {
  if (s.discarding_ || s.Gone()) return;
  // Resetting at once would be allowed (RFC 9113 §8.1), but a client still
  // uploading may then lose the response it has been sent.
  s.discarding_ = true;
  s.discard_until_ = store::LoopNow() + options_.discard_timeout;
  ++discarding_;
  watchdog_.cancel();  // to schedule the end
}

bool Http2Connection::WindowClosed(const Http2Stream& s) const {
  return nghttp2_session_get_stream_remote_window_size(session_, s.id_) <= 0 ||
         nghttp2_session_get_remote_window_size(session_) <= 0;
}

bool Http2Connection::TakeStallPlace(Http2Stream& s) {
  if (flood_.TakeStallPlace()) return true;
  ++stats_.stall_resets;
  if (stall_bound_fn_) stall_bound_fn_(s);
  s.Reset(Http2ErrorCode::kEnhanceYourCalm);
  return false;
}

void Http2Connection::EndDiscard(Http2Stream& s) {
  if (s.Gone()) return;
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s.id_, NGHTTP2_NO_ERROR);
  s.local_reset_ = true;
  Kick();
}

void Http2Connection::MaybeErase(Http2Stream& s) {
  if (!s.closed_ || s.handler_ == Http2Stream::Handler::kRunning ||
      s.handler_ == Http2Stream::Handler::kReady) {
    return;
  }
  if (s.dispatched_ && --busy_ == 0) idle_since_ = store::LoopNow();
  if (s.finished_) --finished_;
  if (s.discarding_) --discarding_;
  if (!dead_ && session_ != nullptr) nghttp2_session_set_stream_user_data(session_, s.id_, nullptr);
  streams_.erase(s.id_);
  if (streams_.empty()) ReleaseIdleBuffers();
}

void Http2Connection::ReleaseIdleBuffers() {
  headers_.Release();
  if (pending_.empty()) std::string().swap(pending_);
  if (!writing_.empty()) return;
  std::string().swap(writing_);
  if (auto* tls = std::get_if<TlsStream>(&stream_)) tls->ReleaseBuffers();
}

void Http2Connection::PostCancel(Http2Stream& s) {
  if (!s.cancel_fn_ || s.cancel_posted_) return;
  s.cancel_posted_ = true;
  ++tasks_;
  asio::post(executor_, [this, id = s.id_] {
    if (Http2Stream* stream = Find(id);
        stream != nullptr && stream->handler_ == Http2Stream::Handler::kRunning &&
        stream->cancel_fn_) {
      auto fn = std::move(stream->cancel_fn_);
      stream->cancel_fn_ = nullptr;
      fn();
    }
    TaskDone();
  });
}

Task<void> Http2Connection::WriteLoop() {
  while (!dead_) {
    Pull();
    if (pending_.empty()) {
      const bool done = fatal_ || session_ == nullptr ||
                        (nghttp2_session_want_read(session_) == 0 &&
                         nghttp2_session_want_write(session_) == 0);
      if (done) {
        if (close_reason_ == Http2CloseReason::kOpen) SetReason(Http2CloseReason::kDone);
        // Everything is written: FIN, and the reader stops to linger.
        finishing_ = true;
        ErrorCode ignored;
        Lowest(stream_).socket().shutdown(tcp::socket::shutdown_send, ignored);
        Lowest(stream_).socket().cancel(ignored);
        read_wake_.Notify();
        break;
      }
      // The last stream may have gone before its frames were written.
      if (streams_.empty()) ReleaseIdleBuffers();
      co_await write_wake_.Wait(Clock::time_point::max());
      continue;
    }
    writing_.swap(pending_);
    const ErrorCode ec = co_await http2_detail::WriteFrames(stream_, writing_, options_.write_timeout);
    writing_.clear();
    if (ec) {
      Teardown(Http2CloseReason::kIoError);
      break;
    }
    read_wake_.Notify();
  }
  TaskDone();
}

Task<void> Http2Connection::Watchdog() {
  while (!dead_) {
    const auto now = store::LoopNow();
    auto next = now + options_.idle_timeout;
    if (busy_ == 0 && !terminating_) {
      const auto idle_end = idle_since_ + options_.idle_timeout;
      if (now >= idle_end) {
        terminating_ = true;
        SetReason(Http2CloseReason::kIdle);
        nghttp2_session_terminate_session(session_, NGHTTP2_NO_ERROR);
        Kick();
      } else {
        next = idle_end;
      }
    }
    if (discarding_ > 0) {
      for (const auto& [id, s] : streams_) {
        if (!s->discarding_ || s->Gone()) continue;
        if (now >= s->discard_until_) {
          EndDiscard(*s);
        } else {
          next = std::min(next, s->discard_until_);
        }
      }
    }
    if (notice_sent_ && !final_goaway_) {
      if (now >= notice_at_ + kGoawayGrace) {
        final_goaway_ = true;
        nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                              nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                              nullptr, 0);
        Kick();
      } else {
        next = std::min(next, notice_at_ + kGoawayGrace);
      }
    }
    watchdog_.expires_at(next);
    co_await watchdog_.async_wait(kUseTuple);
  }
  TaskDone();
}

void Http2Connection::Shutdown() {
  if (session_ == nullptr) {
    shutdown_asked_ = true;
    return;
  }
  if (dead_ || notice_sent_ || terminating_) return;
  notice_sent_ = true;
  notice_at_ = store::LoopNow();
  nghttp2_submit_shutdown_notice(session_);
  nghttp2_submit_ping(session_, NGHTTP2_FLAG_NONE, nullptr);
  watchdog_.cancel();  // to schedule the final GOAWAY
  Kick();
}

void Http2Connection::Close() { Teardown(Http2CloseReason::kClosed); }

void Http2Connection::Teardown(Http2CloseReason reason) {
  if (dead_) return;
  dead_ = true;
  SetReason(reason);
  Lowest(stream_).close();
  std::vector<std::int32_t> ids;
  ids.reserve(streams_.size());
  for (const auto& [id, s] : streams_) ids.push_back(id);
  for (const std::int32_t id : ids) {
    if (Http2Stream* s = Find(id); s != nullptr && !s->closed_) {
      CloseStream(*s, NGHTTP2_NO_ERROR);
    }
  }
  write_wake_.Notify();
  read_wake_.Notify();
  watchdog_.cancel();
}

}  // namespace tollgate::gateway
