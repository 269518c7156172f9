// What both sides of HTTP/2 (the server side, connection.cc, and the client
// side towards upstreams, upstream_link.cc) do alike between a socket
// and an nghttp2 session: frames out of the session and onto the socket,
// and a body handed to nghttp2 piece by piece through its data provider.
#pragma once

#include <nghttp2/nghttp2.h>
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "gateway/http2/types.h"
#include "gateway/io/net.h"

namespace tollgate::gateway::http2_detail {

// Queues our SETTINGS (`settings`), and opens the connection's receive
// window to `connection_window` bytes (at most 2^31 - 1) when that is more
// than the 65,535 bytes it starts with. False when nghttp2 refuses them.
bool SubmitSettings(nghttp2_session* session, std::span<const nghttp2_settings_entry> settings,
                    std::uint32_t connection_window);

// Sets setting `id` to `value` in the SETTINGS frame that begins `frames`
// (frames taken from nghttp2, not yet sent), so that the peer is told a
// value nghttp2 does not enforce itself. False when that frame has no such
// setting.
bool RewriteSetting(std::string& frames, std::uint16_t id, std::uint32_t value);

// Appends a response HEADERS frame with END_STREAM for stream `id` whose
// only field is `:status` `status` (three digits), written without nghttp2:
// for a stream nghttp2 resets before it would send a response. Its field
// is a literal that is not indexed, so the HPACK encoder's table stays as
// nghttp2 has it; but a block must not go out ahead of the one that carries
// a table size update the peer's SETTINGS made due (RFC 7541 §4.2).
void AppendStatusOnlyResponse(std::string& frames, std::int32_t id, std::string_view status);

// Appends a GOAWAY frame (`last_stream`, error `code`) written without
// nghttp2: for a session in a state nghttp2 cannot go on from.
void AppendGoaway(std::string& frames, std::int32_t last_stream, std::uint32_t code);

// Appends the frames nghttp2 has to send to `pending` until it holds `max`
// bytes (one frame may go past it) or nghttp2 has none left. Returns 0, or
// nghttp2's error (the session cannot go on).
int PullFrames(nghttp2_session* session, std::string& pending, std::size_t max);

// Writes all of `frames`: on plain TCP what the socket takes at once without
// an asynchronous operation (the usual case), the rest within `timeout`.
Task<ErrorCode> WriteFrames(AnyStream& stream, const std::string& frames,
                            std::chrono::steady_clock::duration timeout);

// nghttp2's data-provider read over `body` for stream `id`: copies what fits
// of body.data into `buf`; NGHTTP2_ERR_DEFERRED once the piece is used up
// and more is to come (resume the stream's data when it is there); at the
// end, EOF, with the trailers when body.trailers_pending. `taken` is
// notified whenever the piece is used up or the end taken.
ssize_t ReadBodySource(nghttp2_session* session, std::int32_t id, BodySource& body,
                       Wakeup& taken, std::uint8_t* buf, std::size_t length,
                       std::uint32_t* data_flags);

}  // namespace tollgate::gateway::http2_detail
