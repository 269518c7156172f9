#include "gateway/http2/stream.h"

#include <nghttp2/nghttp2.h>

#include <charconv>
#include <utility>

#include "base/loop_time.h"
#include "gateway/http2/connection.h"
#include "gateway/http2/header_list.h"
#include "gateway/http2/server_callbacks.h"

namespace tollgate::gateway {

namespace {

using http2_detail::ConnectionSpecific;
using http2_detail::HeaderList;

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

}  // namespace

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

bool Http2Stream::TakeRequestHeader() {
  // RFC 9113 §8.3.1: a Host that names another authority is malformed.
  if (!host_.empty() && !authority_.empty() && !http2_detail::IEquals(host_, authority_)) {
    return false;
  }
  request_.method_string(method_);
  const bool connect = request_.method() == http::verb::connect;
  request_.target(connect ? authority_ : path_);
  // The callbacks kept Host and Cookie out of the fields: inserted, not set
  // (no lookup for an earlier one).
  request_.insert(http::field::host, host_.empty() ? authority_ : host_);
  if (!cookie_.empty()) request_.insert(http::field::cookie, cookie_);
  method_.clear();
  path_.clear();
  cookie_.clear();
  header_bytes_ = 0;  // trailers have a budget of their own
  return true;
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

ErrorCode Http2Stream::SubmitResponse(const http::response_header<Fields>& head, Http2Body body) {
  if (response_submitted_) return MakeErrorCode(Http2Errc::kWrongState);
  if (Gone()) return StateError();
  const unsigned status = head.result_int();
  if (status < 100 || status > 999 || status == 101) return MakeErrorCode(Http2Errc::kWrongState);
  const bool interim = status < 200;
  const bool forbidden = request_.method() == http::verb::head || status == 204 || status == 304;
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
    rv =
        nghttp2_submit_headers(session, NGHTTP2_FLAG_NONE, id_, nullptr, nva, list.size(), nullptr);
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

}  // namespace tollgate::gateway
