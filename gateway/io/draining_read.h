// DrainingRead: one read buffer for which a short read counts as proof that
// the socket's receive queue is empty, as nginx treats a short recv() when
// epoll tells it whether the peer's end of stream is pending.
//
// Asio tries every read at once before it waits for readiness, unless the
// socket's last read found it exhausted, which for Asio means only the peer's
// end of stream. A gateway's reads are mostly answers that have not arrived
// yet: each costs a recv() that fails with EAGAIN (one or two per proxied
// request). After a read that took everything the socket held,
// with edge-triggered epoll the next data or end of stream raises a new
// event, so the read after it can wait for that event at once.
//
// A short read alone does not prove that: an end of stream that arrived with
// the data raised its event before the read, and the read leaves it queued
// (the next recv() returns 0). Such a read, waiting for an event that never
// comes, would hold a close-delimited body or a half-closed connection until
// its deadline. So the read asks the kernel: on a socket set up with
// EnableDrainingReads() (TCP_INQ), recvmsg() says how much is still queued,
// and the kernel counts a pending end of stream as more to read. Only a read
// that left 0 behind is exhausted; without that answer (another kernel, an
// unprepared socket) every read is tried first, as Asio does.
//
// Implemented as Asio's receive operation for this buffer type. It relies on
// Asio's epoll reactor internals and is compiled only for the Boost this
// project builds with (Debian 12's 1.81); elsewhere DrainingRead is an
// ordinary buffer and reads behave as Asio's do.
#pragma once

#include <boost/asio/basic_stream_socket.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/system/error_code.hpp>
#include <boost/version.hpp>
#include <cstddef>

namespace tollgate::gateway {

// A sequence of exactly one mutable buffer.
class DrainingRead {
 public:
  using value_type = boost::asio::mutable_buffer;
  using const_iterator = const boost::asio::mutable_buffer*;

  explicit DrainingRead(const boost::asio::mutable_buffer& buffer) : buffer_(buffer) {}
  const_iterator begin() const { return &buffer_; }
  const_iterator end() const { return &buffer_ + 1; }

 private:
  boost::asio::mutable_buffer buffer_;
};

// Lets reads of the connected TCP socket `fd` know what they leave queued
// (TCP_INQ, Linux 4.18+). Harmless where unsupported.
void EnableDrainingReads(int fd);

namespace draining_detail {

// One non-blocking recvmsg() into `buffer`, as Asio's non_blocking_recv1():
// false when it would block; true when done, with `ec` (end of stream is
// asio::error::eof) and `bytes`. `queued`: the bytes the kernel says are left
// (an end of stream counts), or -1 when it did not say.
bool Receive(int fd, const boost::asio::mutable_buffer& buffer, int flags,
             boost::system::error_code& ec, std::size_t& bytes, int& queued);

}  // namespace draining_detail
}  // namespace tollgate::gateway

#if BOOST_VERSION / 100 == 1081 && defined(BOOST_ASIO_HAS_EPOLL) && \
    !defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT)
namespace boost::asio::detail {

template <>
inline reactor_op::status reactive_socket_recv_op_base<tollgate::gateway::DrainingRead>::do_perform(
    reactor_op* base) {
  auto* o = static_cast<reactive_socket_recv_op_base*>(base);
  const mutable_buffer buffer = *o->buffers_.begin();
  if ((o->state_ & socket_ops::stream_oriented) == 0) {
    // Not TCP: Asio's own operation.
    return socket_ops::non_blocking_recv1(o->socket_, buffer.data(), buffer.size(), o->flags_,
                                          false, o->ec_, o->bytes_transferred_)
               ? done
               : not_done;
  }
  int queued = -1;
  if (!tollgate::gateway::draining_detail::Receive(o->socket_, buffer, o->flags_, o->ec_,
                                                   o->bytes_transferred_, queued)) {
    return not_done;
  }
  // Asio's own rule (end of stream, or an error: nothing was read) included.
  if (o->bytes_transferred_ == 0) return done_and_exhausted;
  return o->bytes_transferred_ < buffer.size() && queued == 0 ? done_and_exhausted : done;
}

}  // namespace boost::asio::detail
#endif
