#include "gateway/http2/frame_io.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <boost/asio/write.hpp>
#include <cstring>

#include "gateway/http2/header_list.h"

namespace tollgate::gateway::http2_detail {

bool SubmitSettings(nghttp2_session* session, std::span<const nghttp2_settings_entry> settings,
                    std::uint32_t connection_window) {
  if (nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, settings.data(), settings.size()) != 0) {
    return false;
  }
  const auto window = static_cast<std::int32_t>(
      std::min<std::uint32_t>(connection_window, NGHTTP2_MAX_WINDOW_SIZE));
  if (window > NGHTTP2_INITIAL_CONNECTION_WINDOW_SIZE) {
    nghttp2_session_set_local_window_size(session, NGHTTP2_FLAG_NONE, 0, window);
  }
  return true;
}

bool RewriteSetting(std::string& frames, std::uint16_t id, std::uint32_t value) {
  constexpr std::size_t kHeader = 9;
  constexpr std::size_t kEntry = 6;
  if (frames.size() < kHeader || frames[3] != NGHTTP2_SETTINGS ||
      (frames[4] & NGHTTP2_FLAG_ACK) != 0) {
    return false;
  }
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(frames[i]); };
  const std::size_t length = (std::size_t{byte(0)} << 16) | (std::size_t{byte(1)} << 8) | byte(2);
  const std::size_t end = std::min(frames.size(), kHeader + length);
  for (std::size_t at = kHeader; at + kEntry <= end; at += kEntry) {
    if (((byte(at) << 8) | byte(at + 1)) != id) continue;
    for (std::size_t i = 0; i < 4; ++i) {
      frames[at + 2 + i] = static_cast<char>((value >> (24 - 8 * i)) & 0xff);
    }
    return true;
  }
  return false;
}

void AppendStatusOnlyResponse(std::string& frames, std::int32_t id, std::string_view status) {
  // RFC 7541 §6.2.2: literal without indexing, the name :status (static
  // table index 8), a 3-byte value without Huffman coding.
  constexpr char kStatusName = 0x08;
  const std::size_t length = 2 + status.size();
  const auto sid = static_cast<std::uint32_t>(id);
  const char head[9] = {0,
                        0,
                        static_cast<char>(length),
                        static_cast<char>(NGHTTP2_HEADERS),
                        static_cast<char>(NGHTTP2_FLAG_END_STREAM | NGHTTP2_FLAG_END_HEADERS),
                        static_cast<char>((sid >> 24) & 0x7f),
                        static_cast<char>((sid >> 16) & 0xff),
                        static_cast<char>((sid >> 8) & 0xff),
                        static_cast<char>(sid & 0xff)};
  frames.append(head, sizeof head);
  frames.push_back(kStatusName);
  frames.push_back(static_cast<char>(status.size()));
  frames.append(status);
}

void AppendGoaway(std::string& frames, std::int32_t last_stream, std::uint32_t code) {
  const auto last = static_cast<std::uint32_t>(last_stream);
  const std::uint8_t goaway[17] = {
      0, 0, 8, NGHTTP2_GOAWAY, 0, 0, 0, 0, 0,
      static_cast<std::uint8_t>((last >> 24) & 0x7f), static_cast<std::uint8_t>(last >> 16),
      static_cast<std::uint8_t>(last >> 8), static_cast<std::uint8_t>(last),
      static_cast<std::uint8_t>(code >> 24), static_cast<std::uint8_t>(code >> 16),
      static_cast<std::uint8_t>(code >> 8), static_cast<std::uint8_t>(code)};
  frames.append(reinterpret_cast<const char*>(goaway), sizeof goaway);
}

int PullFrames(nghttp2_session* session, std::string& pending, std::size_t max) {
  while (pending.size() < max) {
    const std::uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(session, &data);
    if (n < 0) return static_cast<int>(n);
    if (n == 0) break;
    pending.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
  }
  return 0;
}

Task<ErrorCode> WriteFrames(AnyStream& stream, const std::string& frames,
                            std::chrono::steady_clock::duration timeout) {
  ErrorCode ec;
  std::size_t done = 0;
  if (auto* plain = std::get_if<TcpStream>(&stream)) {
    done = plain->TryWrite(asio::buffer(frames), ec);
  }
  if (!ec && done < frames.size()) {
    Lowest(stream).expires_after(timeout);
    auto [write_ec, n] = co_await std::visit(
        [&](auto& s) {
          return asio::async_write(s, asio::buffer(frames.data() + done, frames.size() - done),
                                   kUseTuple);
        },
        stream);
    ec = write_ec;
  }
  co_return ec;
}

ssize_t ReadBodySource(nghttp2_session* session, std::int32_t id, BodySource& body,
                       Wakeup& taken, std::uint8_t* buf, std::size_t length,
                       std::uint32_t* data_flags) {
  const std::size_t n = std::min(length, body.data.size());
  if (n > 0) {
    std::memcpy(buf, body.data.data(), n);
    body.data += n;
  }
  if (body.data.size() > 0) return static_cast<ssize_t>(n);
  if (!body.last) {
    taken.Notify();
    return n > 0 ? static_cast<ssize_t>(n) : static_cast<ssize_t>(NGHTTP2_ERR_DEFERRED);
  }
  *data_flags |= NGHTTP2_DATA_FLAG_EOF;
  if (body.trailers_pending) {
    body.trailers_pending = false;
    HeaderList list;
    for (const auto& [name, value] : body.trailers) list.Add(name, value);
    if (nghttp2_submit_trailer(session, id, list.Get(), list.size()) == 0) {
      *data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    }
  }
  body.end_taken = true;
  taken.Notify();
  return static_cast<ssize_t>(n);
}

}  // namespace tollgate::gateway::http2_detail
