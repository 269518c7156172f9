// Writes of bytes assembled in a std::string (a message's wire form, see
// wire_header.h): the socket's fast path first, with no coroutine frame,
// operation or handler when the socket takes them all at once, then an
// asynchronous write of the rest. Worker thread of the stream only.
#pragma once

#include <chrono>
#include <string>

#include "gateway/io/net.h"

namespace tollgate::gateway {

// Writes what `stream` takes of `wire` at once (plain: send(2); TLS:
// TlsStream::TryWrite, whose records may stay unsent). True when that was
// all, or when it failed (`ec` says so); false when something remains:
// what was written is gone from `wire`, and WriteWireRest() sends the rest.
bool TryWriteWire(AnyStream& stream, std::string& wire, ErrorCode& ec);

// Writes all of `wire` (and over TLS the records still unsent) within
// `timeout`.
Task<ErrorCode> WriteWireRest(AnyStream& stream, const std::string& wire,
                              std::chrono::steady_clock::duration timeout);

}  // namespace tollgate::gateway
