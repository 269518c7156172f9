// DrainingRead: one read buffer for which a short read counts as proof that
// the socket's receive queue is empty, as nginx treats a short recv().
//
// Asio tries every read at once before it waits for readiness, unless the
// socket's last read found it exhausted, which for Asio means only the peer's
// end of stream. A gateway's reads are mostly answers that have not arrived
// yet: each costs a recv() that fails with EAGAIN (~0.25 µs here, one or two
// per proxied request). A TCP recv() that returns fewer bytes than asked
// for found the queue empty, and with edge-triggered epoll the next data
// raises a new event, so the read after it can wait for that event at once.
//
// Implemented as Asio's receive operation for this buffer type: it differs
// from Asio's own only in returning `done_and_exhausted` for any short read.
// It relies on Asio's epoll reactor internals and is compiled only for the
// Boost this project builds with (Debian 12's 1.81); elsewhere DrainingRead
// is an ordinary buffer and reads behave as Asio's do.
#pragma once

#include <boost/asio/basic_stream_socket.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/version.hpp>

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

}  // namespace tollgate::gateway

#if BOOST_VERSION / 100 == 1081 && defined(BOOST_ASIO_HAS_EPOLL) && \
    !defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT)
namespace boost::asio::detail {

template <>
inline reactor_op::status reactive_socket_recv_op_base<tollgate::gateway::DrainingRead>::do_perform(
    reactor_op* base) {
  auto* o = static_cast<reactive_socket_recv_op_base*>(base);
  const mutable_buffer buffer = *o->buffers_.begin();
  if (!socket_ops::non_blocking_recv1(o->socket_, buffer.data(), buffer.size(), o->flags_,
                                      (o->state_ & socket_ops::stream_oriented) != 0, o->ec_,
                                      o->bytes_transferred_)) {
    return not_done;
  }
  // Asio's own rule (end of stream, or an error: nothing was read) included.
  return o->bytes_transferred_ < buffer.size() ? done_and_exhausted : done;
}

}  // namespace boost::asio::detail
#endif
