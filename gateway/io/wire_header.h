// The HTTP/1.x wire form of what tollgate writes itself: a message's
// header, chunked framing around relayed pieces, and header lines parsed
// back into fields. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "gateway/io/net.h"

namespace tollgate::gateway {

// Appends the HTTP/1.x wire form of a header (start line, fields, blank
// line) to `out`. For messages whose framing the fields already state
// (Content-Length, or no body): one contiguous write instead of Beast's
// generic serializer, which is costly on small messages.
// `extra` (complete "Name: value\r\n" lines) goes after the fields.
void AppendWireHeader(const http::request_header<Fields>& header, std::string& out,
                      std::string_view extra = {});
void AppendWireHeader(const http::response_header<Fields>& header, std::string& out,
                      std::string_view extra = {});

// Chunked framing (RFC 9112 §7.1) written by hand around relayed pieces:
// the size line before a chunk of `size` bytes, and the last chunk with
// `trailers` as its field lines.
void AppendChunkSizeLine(std::size_t size, std::string& out);
void AppendLastChunk(const Fields& trailers, std::string& out);

// Adds "Name: value\r\n" lines (AppendRateLimitHeaders') to `fields`.
void AddHeaderLines(std::string_view lines, Fields& fields);

}  // namespace tollgate::gateway
