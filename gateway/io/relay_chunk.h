// RelayChunk: the buffer bytes pass through on their way from one peer to
// another (a streamed body, a WebSocket tunnel's direction), held only
// while bytes are in it: an idle tunnel or connection holds none, as
// nginx's give their buffers back when idle. Chunks come from a small
// stock of spares per thread, so taking and giving one back per message
// costs no allocation on a busy thread.
// Thread-safety: a chunk is used on one thread, and given back on the
// thread that took it.
#pragma once

#include <cstddef>
#include <memory>

namespace tollgate::gateway {

// What one read into a chunk takes at most: a TLS record's plaintext.
inline constexpr std::size_t kRelayChunk = 16 * 1024;

class RelayChunk {
 public:
  RelayChunk() = default;
  RelayChunk(const RelayChunk&) = delete;
  RelayChunk& operator=(const RelayChunk&) = delete;
  ~RelayChunk() { Release(); }

  // kRelayChunk bytes (their content unspecified), taken when not held.
  char* Get() {
    if (!data_) data_ = Take();
    return data_.get();
  }
  // Gives the bytes back (to the thread's spares, or to the allocator when
  // there are enough); Get() takes some again.
  void Release();

 private:
  static std::unique_ptr<char[]> Take();

  std::unique_ptr<char[]> data_;
};

}  // namespace tollgate::gateway
