// Two things about a TCP socket that Asio's public interface does not offer,
// each saving a system call per upstream connection or reuse:
//
// StartConnect() opens the socket non-blocking in one socket(2) call and
// starts a non-blocking connect, as nginx does. Asio's async_connect opens a
// blocking socket, makes it non-blocking with ioctl(FIONBIO), and after the
// socket turns writable calls poll() before getsockopt(SO_ERROR): 10 system
// calls per new upstream connection with the two setsockopt() after it and
// the close, 8 with StartConnect() and ConnectOutcome().
//
// ReadMayFindData() says whether anything (data, end of stream, an error) can
// have arrived on the socket since its last read found it drained, from the
// edge-triggered epoll reactor's own record, without a recv(MSG_PEEK); this
// is how nginx knows an idle keep-alive upstream connection is still usable
// (an event on it closes it).
//
// Both rely on the internals of the Asio this project builds with (Debian
// 12's Boost 1.81, epoll reactor), as draining_read.h does; elsewhere
// StartConnect() reports kUnsupported and ReadMayFindData() says true, and
// callers do what Asio's public interface offers.
//
// Thread-safety: call from the socket's executor only.
#pragma once

#include "gateway/io/io_types.h"

namespace tollgate::gateway {

enum class ConnectStart {
  kInProgress,   // wait for the socket to be writable, then ConnectOutcome()
  kDone,         // connected or failed at once: `ec` says which
  kUnsupported,  // nothing done: use socket.async_connect()
};

// Opens the closed `socket` for `endpoint` (SOCK_NONBLOCK | SOCK_CLOEXEC,
// registered with the reactor as Asio's own open() does) and calls connect().
ConnectStart StartConnect(TcpSocket& socket, const tcp::endpoint& endpoint, ErrorCode& ec);

// The outcome of a non-blocking connect on `fd` once it is writable
// (getsockopt SO_ERROR).
ErrorCode ConnectOutcome(int fd);

// False only when nothing can have arrived on the open `socket` since its
// last read took everything it held, as far as the reactor has handled:
// an event not yet collected by epoll_wait, or collected in this turn but
// not yet handled (its descriptor's turn in the queue comes later), is not
// known. True when unknown.
bool ReadMayFindData(TcpSocket& socket);

}  // namespace tollgate::gateway
