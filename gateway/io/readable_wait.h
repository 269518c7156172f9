// ReadableWait: a wait for a socket to become readable that costs no system
// call to start, for a reader that reads by itself (gateway/io/read_now.h)
// into a buffer it holds only while reading: HTTP/2's FrameReader, an idle
// HTTP/1.1 connection, a WebSocket tunnel's byte relay.
//
// Asio's epoll reactor starts a wait (async_wait, null_buffers) without
// trying it first and re-registers the descriptor for it: one
// epoll_ctl(EPOLL_CTL_MOD) per wait. A receive is started differently: the
// reactor tries it at once only when epoll has reported the socket since a
// receive last found it drained, and otherwise queues it with no system call
// (the socket is registered edge-triggered for input from the start).
// ReadableWait is a buffer sequence for which Asio's receive operation reads
// nothing: the receive completes, with 0 bytes, whenever the reactor would
// try a read, and reports the socket drained, so that the next one is queued
// until epoll reports the socket again.
//
// The caller waits after a read that found the socket drained (its own
// ReadNow, or an Asio read, both of which leave the reactor's record
// right): whatever arrives after that read raises an edge-triggered event,
// which either completes the queued wait or, collected before the wait
// starts, makes the reactor complete it at once. Bytes that OpenSSL holds
// raise no event: NoteHeldBytes (read_now.h) first. A completion says the socket may
// be readable: the read after it can find nothing (an event the reactor
// recorded before that caller's last read), and the caller then waits again.
//
// Usage: socket.async_receive(ReadableWait(), ReadableWait::kFlags, token);
// the completion's error is the wait's own (cancellation, a closed socket).
//
// Relies on the epoll reactor's internals of the Asio this project builds
// with (Debian 12's Boost 1.81), as draining_read.h does. Elsewhere the
// receive is Asio's own, and kFlags (MSG_PEEK) makes it a peek at one byte:
// a wait that costs a recv(), and completes with end of stream or the
// socket's error as a read would.
#pragma once

#include <sys/socket.h>

#include <boost/asio/basic_stream_socket.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/version.hpp>

namespace tollgate::gateway {

// A buffer of its own type (a buffer is a sequence of itself): one byte of
// the thread's, written only where the receive is Asio's own peek.
class ReadableWait : public boost::asio::mutable_buffer {
 public:
  static constexpr int kFlags = MSG_PEEK;

  ReadableWait() : mutable_buffer(&PeekByte(), 1) {}

 private:
  static unsigned char& PeekByte() {
    thread_local unsigned char byte = 0;
    return byte;
  }
};

}  // namespace tollgate::gateway

#if BOOST_VERSION / 100 == 1081 && defined(BOOST_ASIO_HAS_EPOLL) && \
    !defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT)
namespace boost::asio::detail {

// Reads nothing: done, and the socket counted as drained (the reactor stops
// trying reads at once until epoll reports it again).
template <>
inline reactor_op::status reactive_socket_recv_op_base<tollgate::gateway::ReadableWait>::do_perform(
    reactor_op*) {
  return done_and_exhausted;
}

}  // namespace boost::asio::detail
#endif
