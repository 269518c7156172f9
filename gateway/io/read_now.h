// ReadNow: one read of what a client or upstream stream holds now, made
// outside Asio's operations, for readers that wait for readability with no
// buffer (ReadableWait, gateway/io/readable_wait.h) and then read into a
// buffer they take only for that read: HTTP/2's FrameReader, an idle
// HTTP/1.1 connection and a WebSocket tunnel's byte relay. The reactor is
// told what the read found (NoteReadOutcome, gateway/io/socket_internals.h),
// so that an Asio read that follows is tried at once when bytes were left
// behind.
// Single-threaded: call from the stream's executor, with no read pending.
#pragma once

#include <cstddef>

#include "gateway/io/net.h"

namespace tollgate::gateway {

// Reads into `buffer` what is there now: the bytes read, 0 when nothing is
// (`exhausted` then too), or `ec` (end of stream: asio::error::eof; TLS also
// stream_truncated). `exhausted`: the read took everything the socket held
// (the kernel said so, TCP_INQ; over TLS nor does OpenSSL hold any), so the
// next read can wait for readability first.
std::size_t ReadNow(AnyStream& stream, asio::mutable_buffer buffer, bool& exhausted, ErrorCode& ec);

// Before the first readability wait on a stream whose last read was an
// Asio operation's: bytes that OpenSSL holds already raise no event on the
// socket, so the reactor is told to complete the wait at once.
void NoteHeldBytes(AnyStream& stream);

}  // namespace tollgate::gateway
