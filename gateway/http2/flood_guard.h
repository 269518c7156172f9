// The flood accounting of the server side of an HTTP/2 connection
// (RFC 9113 §10.5): what a peer may make the connection do without a
// request to show for it. Resets and stream errors the peer causes drain
// one token bucket (reset_burst, refilled at resets_per_second: the rapid
// reset of CVE-2023-44487), SETTINGS, PING, PRIORITY and empty DATA frames
// another (control_frame_burst, control_frames_per_second); header blocks
// over max_header_list_bytes (HPACK bombs) count up to
// max_oversized_headers; at most max_stalled_streams WriteBody calls wait on
// a closed flow-control window at once. A spent budget is the connection's
// to answer (GOAWAY ENHANCE_YOUR_CALM, or a reset stream). Also remembers the
// streams the connection reset lately, whose frames are no fault of the
// peer. Single-threaded: the connection's.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "gateway/http2/options.h"
#include "gateway/http2/recent_ids.h"

namespace tollgate::gateway::http2_detail {

// A token bucket: `burst` tokens, refilled at `per_second`.
class TokenBucket {
 public:
  TokenBucket(std::uint32_t burst, std::uint32_t per_second)
      : burst_(burst), per_second_(per_second), tokens_(burst) {}
  // False when empty.
  bool Take(std::chrono::steady_clock::time_point now);

 private:
  double burst_;
  double per_second_;
  double tokens_;
  std::chrono::steady_clock::time_point last_{};
};

class FloodGuard {
 public:
  explicit FloodGuard(const Http2Options& options);

  // A reset or a stream error the peer caused at `now`: false once the
  // reset budget is spent.
  bool PeerFault(std::chrono::steady_clock::time_point now) { return resets_.Take(now); }
  // A SETTINGS, PING, PRIORITY or empty DATA frame at `now`: false once the
  // control-frame budget is spent.
  bool ControlFrame(std::chrono::steady_clock::time_point now) { return control_frames_.Take(now); }
  // A header block over max_header_list_bytes: false beyond
  // max_oversized_headers of them.
  bool OversizedHeader() { return ++oversized_headers_ <= max_oversized_headers_; }

  // A WriteBody call is about to wait on a closed window: false when
  // max_stalled_streams others wait already. A place taken is given back
  // when the wait ends.
  bool TakeStallPlace() {
    if (stalled_ >= max_stalled_streams_) return false;
    ++stalled_;
    return true;
  }
  void ReturnStallPlace() { --stalled_; }

  // The connection sent RST_STREAM on stream `id`.
  void SentReset(std::int32_t id) { recent_resets_.Add(id); }
  // Whether it did so lately: the peer may not have seen it when it sent
  // more on the stream.
  bool ResetLately(std::int32_t id) const { return recent_resets_.Contains(id); }

 private:
  TokenBucket resets_;
  TokenBucket control_frames_;
  RecentIds recent_resets_;  // RST_STREAMs we sent
  std::uint32_t max_oversized_headers_;
  std::uint32_t oversized_headers_ = 0;  // header blocks over max_header_list_bytes
  std::uint32_t max_stalled_streams_;
  std::uint32_t stalled_ = 0;  // WriteBody calls waiting on a closed window
};

}  // namespace tollgate::gateway::http2_detail
