// Things about a TCP socket that Asio's public interface does not offer,
// each saving a system call or two per connection:
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
// NoteReadOutcome() tells the reactor what a read made outside Asio found,
// so that Asio's next read on the socket is tried at once when bytes were
// left behind (else, after a readiness wait that marked the socket drained,
// it would wait for an event that the queued bytes never raise) and waits
// for the next event when the read took everything.
//
// AcceptNow() accepts a client connection non-blocking in one accept4(2)
// call, as nginx does. Asio's accept makes a blocking socket, which its first
// operation makes non-blocking with ioctl(FIONBIO), and takes it for a
// possible duplicate descriptor, so that closing it first removes it from
// epoll (EPOLL_CTL_DEL): 2 system calls per client connection.
//
// All rely on the internals of the Asio this project builds with (Debian
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

enum class AcceptOutcome {
  kAccepted,     // `socket` is the new connection, `peer` its address
  kWouldBlock,   // no connection waiting: wait for the acceptor to be readable
  kFailed,       // `ec` says why
  kUnsupported,  // nothing done: use acceptor.async_accept()
};

// Accepts a connection waiting on the open `acceptor` into the closed
// `socket` (SOCK_NONBLOCK | SOCK_CLOEXEC, registered with the reactor as
// Asio's own accept does). Makes the listening socket non-blocking the first
// time (one ioctl per acceptor). Never waits.
AcceptOutcome AcceptNow(Acceptor& acceptor, TcpSocket& socket, tcp::endpoint& peer,
                        ErrorCode& ec);

// False only when nothing can have arrived on the open `socket` since its
// last read took everything it held, as far as the reactor has handled:
// an event not yet collected by epoll_wait, or collected in this turn but
// not yet handled (its descriptor's turn in the queue comes later), is not
// known. True when unknown.
bool ReadMayFindData(TcpSocket& socket);

// A read of the open `socket` that bypassed Asio took everything the socket
// held (`exhausted`: by the kernel's count, TCP_INQ) or left some behind.
void NoteReadOutcome(TcpSocket& socket, bool exhausted);

}  // namespace tollgate::gateway
