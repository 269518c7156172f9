// Small pieces of HTTP/1.1 reading and writing that the HTTP/1.1 adapter
// and the upstream exchange share: feeding a parser what a buffer already
// holds, telling a peer that left from a broken message, and visiting the
// stream variant. Heavy (Beast): gateway implementation files only.
#pragma once

#include <utility>
#include <variant>

#include "gateway/io/net.h"

namespace tollgate::gateway {

inline bool IsClientGone(const ErrorCode& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::operation_aborted ||
         ec == ssl::error::stream_truncated;
}

// How far ParseBuffered goes: kHeader stops after the header (a header-only
// parser would refuse the body).
enum class ParseUntil { kMessage, kHeader };

// Feeds `parser` what `buffer` already holds. True when that ended the
// message (or its header), or failed it (`ec`); false when the rest is still
// to be read. Beast's async_read would find the same bytes, but then posts
// its completion: the exchange would wait behind every queued handler for no
// I/O.
template <typename Parser>
bool ParseBuffered(beast::flat_buffer& buffer, Parser& parser, ErrorCode& ec,
                   ParseUntil until = ParseUntil::kMessage) {
  const auto done = [&] {
    return until == ParseUntil::kHeader ? parser.is_header_done() : parser.is_done();
  };
  while (!done() && buffer.size() > 0) {
    const std::size_t used = parser.put(buffer.data(), ec);
    buffer.consume(used);
    if (ec == http::error::need_more) {
      ec = {};
      return false;
    }
    if (ec) return true;
    if (used == 0) return false;
  }
  return done();
}

template <typename Fn>
auto Visit(AnyStream& stream, Fn&& fn) {
  return std::visit(std::forward<Fn>(fn), stream);
}

}  // namespace tollgate::gateway
