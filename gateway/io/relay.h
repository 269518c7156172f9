// Streams a message body from one connection to another through a fixed
// buffer (Beast's buffer_body relay), so memory stays bounded whatever the
// body size; chunked framing is re-encoded by the serializer.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "gateway/io/net.h"
#include "base/loop_time.h"

namespace tollgate::gateway {

inline constexpr std::size_t kRelayChunk = 16 * 1024;

enum class RelayFailure { kNone, kRead, kWrite };

struct RelayResult {
  RelayFailure failure = RelayFailure::kNone;
  ErrorCode ec;
  std::uint64_t bytes = 0;  // body bytes written
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

// Writes the header of `parser`'s message to `out`, then the body as it is
// read from `in`, each piece shown to `on_piece` once it is written (the
// client does not wait for what looks at it). `buffer` holds kRelayChunk
// bytes.
template <bool kIsRequest, typename OnPiece = NoPieceHook>
Task<RelayResult> Relay(AnyStream& in, beast::flat_buffer& in_buffer,
                        http::parser<kIsRequest, http::buffer_body, FieldAlloc>& parser,
                        AnyStream& out, char* buffer, RelayTimeouts timeouts,
                        OnPiece on_piece = {}) {
  RelayResult result;
  http::serializer<kIsRequest, http::buffer_body, Fields> serializer{parser.get()};
  auto& body = parser.get().body();
  body.data = nullptr;
  body.size = 0;
  body.more = true;
  Lowest(out).expires_after(timeouts.Within(timeouts.write));
  auto [header_ec, header_n] = co_await std::visit(
      [&](auto& s) { return http::async_write_header(s, serializer, kUseTuple); }, out);
  if (header_ec) co_return RelayResult{RelayFailure::kWrite, header_ec, 0};
  // Each operation is cut to what is left of the deadline; one that would
  // start past it fails at once (one that completes within its 1 ms floor
  // does not keep the relay going).
  const auto past_deadline = [&] { return store::LoopNow() >= timeouts.deadline; };
  do {
    if (!parser.is_done()) {
      if (past_deadline()) {
        co_return RelayResult{RelayFailure::kRead, beast::error::timeout, result.bytes};
      }
      body.data = buffer;
      body.size = kRelayChunk;
      Lowest(in).expires_after(timeouts.Within(timeouts.read));
      auto [ec, n] = co_await std::visit(
          [&](auto& s) { return http::async_read_some(s, in_buffer, parser, kUseTuple); }, in);
      if (ec == http::error::need_buffer) ec = {};
      if (ec) co_return RelayResult{RelayFailure::kRead, ec, result.bytes};
      body.size = kRelayChunk - body.size;
      // A read may parse only framing. A null pointer then means "nothing
      // yet"; a zero-size piece would be serialized as the last chunk.
      body.data = body.size > 0 ? buffer : nullptr;
      body.more = !parser.is_done();
    } else {
      body.data = nullptr;
      body.size = 0;
      body.more = false;
    }
    const std::size_t piece = body.data != nullptr ? body.size : 0;
    result.bytes += body.size;
    if (past_deadline()) {
      // While the body is still incomplete the relay waits for its reader's
      // peer (a dripping client: 408), not for the writer's.
      co_return RelayResult{parser.is_done() ? RelayFailure::kWrite : RelayFailure::kRead,
                            beast::error::timeout, result.bytes};
    }
    Lowest(out).expires_after(timeouts.Within(timeouts.write));
    auto [ec, n] = co_await std::visit(
        [&](auto& s) { return http::async_write(s, serializer, kUseTuple); }, out);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) co_return RelayResult{RelayFailure::kWrite, ec, result.bytes};
    if (piece > 0) on_piece(buffer, piece);  // still in `buffer`: read again only next turn
  } while (!parser.is_done() || !serializer.is_done());
  co_return result;
}

}  // namespace tollgate::gateway
