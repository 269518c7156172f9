#include "gateway/http2/flood_guard.h"

#include <algorithm>

namespace tollgate::gateway::http2_detail {
namespace {

// RST_STREAMs a connection remembers at most (RecentIds).
constexpr std::size_t kMaxRecentResets = 1024;

}  // namespace

bool TokenBucket::Take(std::chrono::steady_clock::time_point now) {
  if (last_ != std::chrono::steady_clock::time_point{}) {
    const double elapsed = std::chrono::duration<double>(now - last_).count();
    if (elapsed > 0) tokens_ = std::min(burst_, tokens_ + elapsed * per_second_);
  }
  last_ = now;
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

FloodGuard::FloodGuard(const Http2Options& options)
    : resets_(options.reset_burst, options.resets_per_second),
      control_frames_(options.control_frame_burst, options.control_frames_per_second),
      // A peer may still send on the streams reset while it had its
      // largest number of streams open (bounded: 4 bytes an id).
      recent_resets_(
          std::min<std::size_t>(2 * std::size_t{options.max_concurrent_streams}, kMaxRecentResets)),
      max_oversized_headers_(options.max_oversized_headers),
      max_stalled_streams_(options.max_stalled_streams) {}

}  // namespace tollgate::gateway::http2_detail
