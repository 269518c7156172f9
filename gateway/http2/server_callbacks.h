// Http2Callbacks: nghttp2's callbacks for the server side of HTTP/2
// (Http2Connection, connection.h). They only record what arrived and wake
// whoever waits; handlers start after nghttp2_session_mem_recv has
// returned. Include only from the server side's own .cc files.
// Single-threaded, as the connection.
#pragma once

#include <nghttp2/nghttp2.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "gateway/http2/options.h"

namespace tollgate::gateway {

class Http2Connection;

struct Http2Callbacks {
  // A server session (`*session`) whose callbacks are these, called with
  // `connection`, and that leaves to the connection what nghttp2 would do
  // on its own with `options` (windows, the stream limit, resets). 0, or
  // nghttp2's error (then no session).
  static int NewSession(nghttp2_session** session, const Http2Options& options,
                        Http2Connection* connection);

  // The data provider of a response body (Http2Stream::SubmitResponse).
  static ssize_t ReadData(nghttp2_session* session, std::int32_t id, std::uint8_t* buf,
                          std::size_t length, std::uint32_t* data_flags,
                          nghttp2_data_source* source, void* user_data);

 private:
  static Http2Connection& Self(void* user_data);
  static int OnBeginFrame(nghttp2_session* session, const nghttp2_frame_hd* hd, void* user_data);
  static int OnBeginHeaders(nghttp2_session* session, const nghttp2_frame* frame, void* user_data);
  static int OnHeader(nghttp2_session* session, const nghttp2_frame* frame,
                      const std::uint8_t* name_data, std::size_t name_size,
                      const std::uint8_t* value_data, std::size_t value_size, std::uint8_t flags,
                      void* user_data);
  static int OnInvalidHeader(nghttp2_session* session, const nghttp2_frame* frame,
                             const std::uint8_t* name, std::size_t name_size,
                             const std::uint8_t* value, std::size_t value_size, std::uint8_t flags,
                             void* user_data);
  static int OnInvalidFrame(nghttp2_session* session, const nghttp2_frame* frame, int error,
                            void* user_data);
  static int OnDataChunk(nghttp2_session* session, std::uint8_t flags, std::int32_t id,
                         const std::uint8_t* data, std::size_t size, void* user_data);
  static int OnFrameRecv(nghttp2_session* session, const nghttp2_frame* frame, void* user_data);
  static int OnFrameSend(nghttp2_session* session, const nghttp2_frame* frame, void* user_data);
  static int OnStreamClose(nghttp2_session* session, std::int32_t id, std::uint32_t error_code,
                           void* user_data);
};

}  // namespace tollgate::gateway
