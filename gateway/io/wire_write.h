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

// The largest last message EncryptLastOverTls() takes: one TLS record (16
// KiB at most), with two session tickets and the close_notify beside it,
// fits in one send of TlsStream's output buffer, which its shutdown makes.
inline constexpr std::size_t kLastOverTls = 15 * 1024;

// Encrypts `wire`, the last message of a connection, into `tls`'s output
// buffer only (SSL_write's BIO appends there; tickets owed go first): no
// socket I/O, the stream's shutdown sends it with the close_notify in one
// send. What was taken is gone from `wire`. False when nothing was: `wire`
// is over kLastOverTls, or SSL_write refused (not expected with the
// buffer empty; the usual write then reports what is wrong).
bool EncryptLastOverTls(TlsStream& tls, std::string& wire);

}  // namespace tollgate::gateway
