#include "gateway/io/relay_chunk.h"

#include "gateway/io/thread_spares.h"

namespace tollgate::gateway {

namespace {

// Spares kept per thread: enough for the directions that pass bytes in
// one turn of a busy worker's loop; beyond them a chunk goes back to the
// allocator (whose own thread cache serves the next one).
using Spares = ThreadSpares<char[], 16>;

}  // namespace

void RelayChunk::Release() {
  if (data_) Spares::Put(std::move(data_));
}

std::unique_ptr<char[]> RelayChunk::Take() {
  if (std::unique_ptr<char[]> chunk = Spares::Take()) return chunk;
  return std::make_unique_for_overwrite<char[]>(kRelayChunk);
}

}  // namespace tollgate::gateway
