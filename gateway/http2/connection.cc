#include "gateway/http2/connection.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <vector>

#include "base/loop_time.h"
#include "gateway/http2/frame_io.h"
#include "gateway/http2/server_callbacks.h"

namespace tollgate::gateway {

namespace {

// Shutdown(): the final GOAWAY follows the notice after a PING round trip,
// or after this long without the PING's ACK.
constexpr auto kGoawayGrace = std::chrono::seconds(1);

}  // namespace

Http2Connection::Http2Connection(AnyStream& stream, const Http2Options& options,
                                 Http2Handler handler)
    : Endpoint(stream, {options.max_outbound_bytes, options.write_timeout, options.idle_timeout}),
      options_(options),
      handler_(std::move(handler)),
      flood_(options) {}

Http2Connection::~Http2Connection() { streams_.clear(); }

Http2Stream* Http2Connection::Find(std::int32_t id) {
  const auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : it->second.get();
}

bool Http2Connection::Start() {
  if (Http2Callbacks::NewSession(&session_, options_, this) != 0) return false;
  Pull();
  return http2_detail::RewriteSetting(pending_, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS,
                                      options_.max_concurrent_streams);
}

Task<void> Http2Connection::Run(asio::const_buffer already_read) {
  idle_since_ = store::LoopNow();
  if (!Start()) {
    Teardown(Http2CloseReason::kProtocolError);
    return ReadLoop();  // ends at once
  }
  StartLoops();
  if (shutdown_asked_) Shutdown();
  if (already_read.size() > 0) {
    Feed(static_cast<const std::uint8_t*>(already_read.data()), already_read.size());
  }
  return ReadLoop();
}

void Http2Connection::OnReaderEnd(ErrorCode ec) {
  if (!ec || finishing_) return;
  Teardown(ec == asio::error::eof || ec == ssl::error::stream_truncated
               ? Http2CloseReason::kPeerClosed
               : Http2CloseReason::kIoError);
}

void Http2Connection::OnWriterEnd(WriterEnd end) {
  switch (end) {
    case WriterEnd::kFinished: {
      SetReason(Http2CloseReason::kDone);
      // Everything is written: FIN, and the reader stops to linger.
      finishing_ = true;
      ErrorCode ignored;
      Lowest(stream_).socket().shutdown(tcp::socket::shutdown_send, ignored);
      Lowest(stream_).socket().cancel(ignored);
      read_wake_.Notify();
      return;
    }
    case WriterEnd::kFailed:
      Teardown(Http2CloseReason::kIoError);
      return;
    case WriterEnd::kStopped:
      return;
  }
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
  http2_detail::AppendGoaway(
      pending_, session_ != nullptr ? nghttp2_session_get_last_proc_stream_id(session_) : 0, code);
  Kick();
}

void Http2Connection::Terminate(Http2CloseReason reason, std::uint32_t code) {
  if (terminating_) return;
  SetReason(reason);
  EndSession(code);
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
  if (!s.TakeRequestHeader()) {
    ++stats_.malformed;
    CountPeerFault();
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s.id_, NGHTTP2_PROTOCOL_ERROR);
    return;
  }
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
    AddTask();
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
  ReleaseOutput();
}

void Http2Connection::PostCancel(Http2Stream& s) {
  if (!s.cancel_fn_ || s.cancel_posted_) return;
  s.cancel_posted_ = true;
  AddTask();
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

Http2Connection::Clock::time_point Http2Connection::Watch(Clock::time_point now) {
  auto next = Clock::time_point::max();
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
  return next;
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
  CloseSocket();
  std::vector<std::int32_t> ids;
  ids.reserve(streams_.size());
  for (const auto& [id, s] : streams_) ids.push_back(id);
  for (const std::int32_t id : ids) {
    if (Http2Stream* s = Find(id); s != nullptr && !s->closed_) {
      CloseStream(*s, NGHTTP2_NO_ERROR);
    }
  }
}

}  // namespace tollgate::gateway
