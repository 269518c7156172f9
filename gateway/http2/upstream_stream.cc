#include "gateway/http2/upstream_stream.h"

#include <nghttp2/nghttp2.h>

#include <string>
#include <utility>

#include "base/loop_time.h"
#include "gateway/http2/upstream_link.h"

namespace tollgate::gateway {

using http2_upstream_detail::StreamState;
using Clock = std::chrono::steady_clock;

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

}  // namespace tollgate::gateway
