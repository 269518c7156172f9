// Streams a message body from one connection to another through a fixed
// buffer (Beast's buffer_body parser), so memory stays bounded whatever the
// body size; chunked framing is re-encoded by hand (wire_header.h).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

#include "gateway/io/net.h"
#include "gateway/io/read_util.h"
#include "gateway/io/relay_chunk.h"
#include "gateway/io/wire_header.h"
#include "gateway/io/wire_write.h"
#include "base/loop_time.h"

namespace tollgate::gateway {

enum class RelayFailure { kNone, kRead, kWrite };

struct RelayResult {
  RelayFailure failure = RelayFailure::kNone;
  ErrorCode ec;
  std::uint64_t bytes = 0;  // body bytes written
  // The header went out: the peer has seen the message start, and a
  // failure can only end it by closing.
  bool header_sent = false;
};

// Each read and each write has its own timeout, and none outlives
// `deadline` (store::LoopNow()'s scale): a peer that keeps every single
// read or write within its timeout, one byte at a time, still cannot hold
// the exchange past the deadline.
struct RelayTimeouts {
  std::chrono::milliseconds read;
  std::chrono::milliseconds write;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();

  // `timeout` from now, or less where the deadline comes first.
  std::chrono::steady_clock::duration Within(std::chrono::milliseconds timeout) const {
    const auto now = store::LoopNow();
    if (deadline == std::chrono::steady_clock::time_point::max()) return timeout;
    return std::max<std::chrono::steady_clock::duration>(
        std::chrono::milliseconds(1), std::min<std::chrono::steady_clock::duration>(
                                          timeout, deadline - now));
  }
};

// What Relay calls with each piece of the body it has read, before writing
// it: nothing, unless the caller passes its own callable.
struct NoPieceHook {
  void operator()(const char* /*data*/, std::size_t /*size*/) const {}
};

// Writes the header of `parser`'s message to `out`, then its body as it is
// read from `in`, each piece shown to `on_piece` once it is written (the
// client does not wait for what looks at it). The framing is the
// message's own fields': chunked when they say so, else the bytes as they
// are. Body bytes already in `in_buffer` go out with the header, and pieces
// that arrive together go out together: one write and one wake-up of the
// peer, as nginx sends them. Otherwise the header goes at once, so that a
// stream whose first event is late still shows its head. Writes go through
// `wire` (the socket's fast path first, see wire_write.h), which holds
// nothing else meanwhile (it is cleared first); `buffer` holds kRelayChunk
// bytes.
template <bool kIsRequest, typename OnPiece = NoPieceHook>
Task<RelayResult> Relay(AnyStream& in, beast::flat_buffer& in_buffer,
                        http::parser<kIsRequest, http::buffer_body, FieldAlloc>& parser,
                        AnyStream& out, char* buffer, std::string& wire, RelayTimeouts timeouts,
                        OnPiece on_piece = {}) {
  RelayResult result;
  const bool chunked = parser.get().chunked();
  wire.clear();
  AppendWireHeader(parser.get().base(), wire);
  // Each operation is cut to what is left of the deadline; one that would
  // start past it fails at once (one that completes within its 1 ms floor
  // does not keep the relay going).
  const auto past_deadline = [&] { return store::LoopNow() >= timeouts.deadline; };
  const auto fail = [&](RelayFailure failure, const ErrorCode& ec) {
    RelayResult failed = result;
    failed.failure = failure;
    failed.ec = ec;
    return failed;
  };
  for (;;) {
    // What in_buffer holds, parsed into `buffer`: as many chunks as there
    // are and fit (need_buffer: it is full).
    auto& body = parser.get().body();
    body.data = buffer;
    body.size = kRelayChunk;
    ErrorCode ec;
    ParseBuffered(in_buffer, parser, ec);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) co_return fail(RelayFailure::kRead, ec);
    const std::size_t piece = kRelayChunk - body.size;
    const bool done = parser.is_done();
    if (piece == 0 && !done && wire.empty()) {
      if (past_deadline()) co_return fail(RelayFailure::kRead, beast::error::timeout);
      // Framing that never ends (a chunk extension or trailers without a
      // line end: the parser takes nothing) fills the buffer to its bound.
      const std::size_t room = beast::read_size(in_buffer, kRelayChunk);
      if (room == 0) co_return fail(RelayFailure::kRead, http::error::buffer_overflow);
      Lowest(in).expires_after(timeouts.Within(timeouts.read));
      auto [rec, n] = co_await std::visit(
          [&](auto& s) { return s.async_read_some(in_buffer.prepare(room), kUseTuple); }, in);
      in_buffer.commit(n);
      // A body without length or chunks ends where its connection does.
      if (rec == asio::error::eof) parser.put_eof(rec);
      if (rec) co_return fail(RelayFailure::kRead, rec);
      continue;
    }
    if (piece > 0) {
      if (chunked) AppendChunkSizeLine(piece, wire);
      wire.append(buffer, piece);
      if (chunked) wire += "\r\n";
      result.bytes += piece;
    }
    if (done && chunked) AppendLastChunk(Fields{}, wire);
    if (past_deadline()) {
      // While the body is still incomplete the relay waits for its reader's
      // peer (a dripping client: 408), not for the writer's.
      co_return fail(done ? RelayFailure::kWrite : RelayFailure::kRead, beast::error::timeout);
    }
    // (Empty: a body that ended with its connection, the last piece out.)
    if (!wire.empty() && !TryWriteWire(out, wire, ec)) {
      ec = co_await WriteWireRest(out, wire, timeouts.Within(timeouts.write));
    }
    wire.clear();
    result.header_sent = true;
    if (ec) co_return fail(RelayFailure::kWrite, ec);
    if (piece > 0) on_piece(buffer, piece);  // still in `buffer`: read again only next turn
    if (done) break;
  }
  // A large piece made `wire` large: an idle connection keeps none of it.
  if (wire.capacity() > kRelayChunk / 4) std::string().swap(wire);
  co_return result;
}

}  // namespace tollgate::gateway
