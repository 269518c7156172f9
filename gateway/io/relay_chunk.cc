#include "gateway/io/relay_chunk.h"

#include <vector>

namespace tollgate::gateway {

namespace {

// Spares kept per thread: enough for the directions that pass bytes in
// one turn of a busy worker's loop; beyond them a chunk goes back to the
// allocator (whose own thread cache serves the next one).
constexpr std::size_t kSpares = 16;

std::vector<std::unique_ptr<char[]>>& Spares() {
  thread_local std::vector<std::unique_ptr<char[]>> spares;
  return spares;
}

}  // namespace

void RelayChunk::Release() {
  if (!data_) return;
  auto& spares = Spares();
  if (spares.size() < kSpares) {
    spares.push_back(std::move(data_));
  } else {
    data_.reset();
  }
}

std::unique_ptr<char[]> RelayChunk::Take() {
  auto& spares = Spares();
  if (spares.empty()) return std::make_unique_for_overwrite<char[]>(kRelayChunk);
  std::unique_ptr<char[]> chunk = std::move(spares.back());
  spares.pop_back();
  return chunk;
}

}  // namespace tollgate::gateway
