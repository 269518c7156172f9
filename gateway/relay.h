// Streams a message body from one connection to another through a fixed
// buffer (Beast's buffer_body relay), so memory stays bounded whatever the
// body size; chunked framing is re-encoded by the serializer.
#pragma once

#include <cstdint>

#include "gateway/net.h"

namespace tollgate::gateway {

inline constexpr std::size_t kRelayChunk = 16 * 1024;

enum class RelayFailure { kNone, kRead, kWrite };

struct RelayResult {
  RelayFailure failure = RelayFailure::kNone;
  ErrorCode ec;
  std::uint64_t bytes = 0;  // body bytes written
};

struct RelayTimeouts {
  std::chrono::milliseconds read;
  std::chrono::milliseconds write;
};

// Writes the header of `parser`'s message to `out`, then the body as it is
// read from `in`. `buffer` holds kRelayChunk bytes.
template <bool kIsRequest>
Task<RelayResult> Relay(AnyStream& in, beast::flat_buffer& in_buffer,
                        http::parser<kIsRequest, http::buffer_body, FieldAlloc>& parser,
                        AnyStream& out, char* buffer, RelayTimeouts timeouts) {
  RelayResult result;
  http::serializer<kIsRequest, http::buffer_body, Fields> serializer{parser.get()};
  auto& body = parser.get().body();
  body.data = nullptr;
  body.size = 0;
  body.more = true;
  Lowest(out).expires_after(timeouts.write);
  auto [header_ec, header_n] = co_await std::visit(
      [&](auto& s) { return http::async_write_header(s, serializer, kUseTuple); }, out);
  if (header_ec) co_return RelayResult{RelayFailure::kWrite, header_ec, 0};
  do {
    if (!parser.is_done()) {
      body.data = buffer;
      body.size = kRelayChunk;
      Lowest(in).expires_after(timeouts.read);
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
    result.bytes += body.size;
    Lowest(out).expires_after(timeouts.write);
    auto [ec, n] = co_await std::visit(
        [&](auto& s) { return http::async_write(s, serializer, kUseTuple); }, out);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) co_return RelayResult{RelayFailure::kWrite, ec, result.bytes};
  } while (!parser.is_done() || !serializer.is_done());
  co_return result;
}

}  // namespace tollgate::gateway
