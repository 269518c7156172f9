// What bounds an HTTP/2 connection (RFC 9113) of the gateway: streams,
// header lists, windows, timeouts and the flood budgets. Sizes in bytes.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace tollgate::gateway {

struct Http2Options {
  std::uint32_t max_concurrent_streams = 128;
  std::uint32_t max_header_list_bytes = 16'384;
  std::uint32_t max_continuations = 8;
  // Header blocks over max_header_list_bytes a connection may send; the
  // next one ends it.
  std::uint32_t max_oversized_headers = 3;
  // SETTINGS_INITIAL_WINDOW_SIZE: what each stream may have buffered.
  std::uint32_t stream_window_bytes = 65'535;
  std::uint32_t connection_window_bytes = 1 << 20;
  std::chrono::milliseconds idle_timeout{60'000};
  std::chrono::milliseconds write_timeout{30'000};
  // A request body still arriving after its response: dropped up to this
  // much and this long (as an HTTP/1.1 session lingers), then the stream
  // is reset (RST_STREAM NO_ERROR).
  std::uint64_t discard_bytes = 64 << 20;
  std::chrono::milliseconds discard_timeout{5'000};
  // WriteBody calls that may wait on a closed flow-control window at once.
  std::uint32_t max_stalled_streams = 16;
  // Frames taken from nghttp2 per write (one frame may go past it).
  std::size_t max_outbound_bytes = 64 * 1024;
  std::uint32_t max_outbound_ack = 1000;
  std::uint32_t reset_burst = 200;
  std::uint32_t resets_per_second = 20;
  std::uint32_t control_frame_burst = 1000;
  std::uint32_t control_frames_per_second = 100;
};

}  // namespace tollgate::gateway
