#include "gateway/http1/exchange_work.h"

#include "gateway/io/read_now.h"
#include "gateway/io/relay_chunk.h"
#include "gateway/io/thread_spares.h"

namespace tollgate::gateway {

namespace {

// Spare Works per thread: enough for a worker's kept-alive clients going
// idle and coming back in turn (a load generator's 64 connections, say);
// beyond them a Work is freed and the next one allocated again. Each keeps
// at most kRelayChunk of read buffer (the pages touched are resident) and
// of wire: at most ~2 MB per worker thread.
using Spares = ThreadSpares<ExchangeWork, 64>;

}  // namespace

std::unique_ptr<ExchangeWork> TakeExchangeWork(const CoreServices& services) {
  // (A thread serves one worker; a spare of another one's is dropped.)
  while (std::unique_ptr<ExchangeWork> work = Spares::Take()) {
    if (work->services == &services) return work;
  }
  return std::make_unique<ExchangeWork>(services);
}

void GiveBackExchangeWork(std::unique_ptr<ExchangeWork> work) {
  work->exchange.Release();
  work->head.reset();
  work->whole.reset();
  work->res_head.reset();
  // A spare keeps what a usual exchange needs, not what a large one grew
  // to (a whole buffered body in `wire`, a large header in `buffer`).
  work->buffer.clear();
  if (work->buffer.capacity() > kRelayChunk) work->buffer.shrink_to_fit();
  work->canonical.clear();
  work->wire.clear();
  if (work->wire.capacity() > kRelayChunk) std::string().swap(work->wire);
  work->extra_headers.clear();
  Spares::Put(std::move(work));
}

bool ReadRequestStart(AnyStream& stream, std::unique_ptr<ExchangeWork>& work,
                      const CoreServices& services, std::size_t max_header_bytes, ErrorCode& ec) {
  if (!work) {
    work = TakeExchangeWork(services);
    work->buffer.max_size(max_header_bytes + kRelayChunk);
  }
  // Beast sizes each later read by the buffer's spare capacity (at least
  // 512 bytes): without room, a streamed body would arrive in tiny reads.
  work->buffer.reserve(kRelayChunk);
  bool exhausted = false;
  const std::size_t n = ReadNow(stream, work->buffer.prepare(kRelayChunk), exhausted, ec);
  if (ec) return true;
  if (n == 0) return false;
  work->buffer.commit(n);
  return true;
}

}  // namespace tollgate::gateway
