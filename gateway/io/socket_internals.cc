#include "gateway/io/socket_internals.h"

#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/error.hpp>
#include <boost/version.hpp>
#include <cerrno>
#include <cstring>

#if BOOST_VERSION / 100 == 1081 && defined(BOOST_ASIO_HAS_EPOLL) && \
    !defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT)
#define TOLLGATE_ASIO_SOCKET_INTERNALS 1
#include <boost/asio/detail/conditionally_enabled_mutex.hpp>
#include <boost/asio/detail/epoll_reactor.hpp>
#include <boost/asio/detail/object_pool.hpp>
#include <boost/asio/detail/socket_ops.hpp>
#endif

namespace tollgate::gateway {
namespace {

ErrorCode SystemError(int error) {
  return ErrorCode(error, asio::error::get_system_category());
}

}  // namespace

ErrorCode ConnectOutcome(int fd) {
  int error = 0;
  socklen_t size = sizeof error;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0) return SystemError(errno);
  return error == 0 ? ErrorCode() : SystemError(error);
}

}  // namespace tollgate::gateway

#ifdef TOLLGATE_ASIO_SOCKET_INTERNALS

namespace tollgate::gateway::socket_internals_detail {

// The reactor's record of one socket, read by the specialization below.
struct ReadProbe {
  asio::detail::epoll_reactor::per_descriptor_data descriptor;
  bool may_find_data = true;
};

// The same record, written: whether the reactor tries the next read at once.
struct ReadMark {
  asio::detail::epoll_reactor::per_descriptor_data descriptor;
  bool try_at_once = true;
};

// The implementation (descriptor, Asio's state bits, reactor record) behind a
// socket: basic_socket keeps it in a protected member, reached through a
// class derived from it (never instantiated).
struct SocketAccess : TcpSocket {
  static auto& Implementation(TcpSocket& socket) {
    return (socket.*&SocketAccess::impl_).get_implementation();
  }
};

}  // namespace tollgate::gateway::socket_internals_detail

namespace boost::asio::detail {

// The epoll reactor's per-socket record keeps its fields private to the
// reactor and to object_pool_access; this specialization of one of the
// latter's member templates, for a type of ours that Asio never uses, reads
// the one needed: whether the reactor would try a read at once, which it
// stops doing after a read that found the socket drained and does again once
// epoll reports an event for it (data, end of stream, error).
template <>
inline void object_pool_access::destroy<tollgate::gateway::socket_internals_detail::ReadProbe>(
    tollgate::gateway::socket_internals_detail::ReadProbe* probe) {
  epoll_reactor::descriptor_state* state = probe->descriptor;
  conditionally_enabled_mutex::scoped_lock lock(state->mutex_);
  probe->may_find_data = state->shutdown_ || state->try_speculative_[epoll_reactor::read_op];
}

// Writes the field ReadProbe reads, by the same route.
template <>
inline void object_pool_access::destroy<tollgate::gateway::socket_internals_detail::ReadMark>(
    tollgate::gateway::socket_internals_detail::ReadMark* mark) {
  epoll_reactor::descriptor_state* state = mark->descriptor;
  conditionally_enabled_mutex::scoped_lock lock(state->mutex_);
  state->try_speculative_[epoll_reactor::read_op] = mark->try_at_once;
}

}  // namespace boost::asio::detail

namespace tollgate::gateway {

namespace {

// Makes `socket` the non-blocking descriptor `fd` (registered with the
// reactor by assign()); closes `fd` on failure. Non-blocking already: Asio's
// first operation would otherwise set it again (ioctl). Not a duplicate of
// another descriptor (what assign() assumes it may be): closing it removes
// it from epoll, no EPOLL_CTL_DEL needed.
bool Adopt(TcpSocket& socket, const tcp& protocol, int fd, ErrorCode& ec) {
  socket.assign(protocol, fd, ec);
  if (ec) {
    ::close(fd);
    return false;
  }
  auto& impl = socket_internals_detail::SocketAccess::Implementation(socket);
  impl.state_ |= asio::detail::socket_ops::internal_non_blocking;
  impl.state_ &= ~asio::detail::socket_ops::possible_dup;
  return true;
}

}  // namespace

ConnectStart StartConnect(TcpSocket& socket, const tcp::endpoint& endpoint, ErrorCode& ec) {
  if (socket.is_open()) return ConnectStart::kUnsupported;
  const int fd = ::socket(endpoint.protocol().family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                          endpoint.protocol().protocol());
  if (fd < 0) {
    ec = SystemError(errno);
    return ConnectStart::kDone;
  }
  if (!Adopt(socket, endpoint.protocol(), fd, ec)) return ConnectStart::kDone;
  for (;;) {
    if (::connect(fd, endpoint.data(), static_cast<socklen_t>(endpoint.size())) == 0) {
      ec = {};
      return ConnectStart::kDone;
    }
    if (errno == EINTR) continue;
    if (errno == EINPROGRESS) return ConnectStart::kInProgress;
    ec = SystemError(errno);
    return ConnectStart::kDone;
  }
}

AcceptOutcome AcceptNow(Acceptor& acceptor, TcpSocket& socket, tcp::endpoint& peer,
                        ErrorCode& ec) {
  if (!acceptor.is_open() || socket.is_open()) return AcceptOutcome::kUnsupported;
  if (!acceptor.native_non_blocking()) {
    acceptor.native_non_blocking(true, ec);
    if (ec) return AcceptOutcome::kUnsupported;
  }
  sockaddr_storage address{};
  int fd = -1;
  for (;;) {
    socklen_t size = sizeof address;
    fd = ::accept4(acceptor.native_handle(), reinterpret_cast<sockaddr*>(&address), &size,
                   SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      if (size > peer.capacity()) {
        ::close(fd);
        ec = SystemError(EINVAL);
        return AcceptOutcome::kFailed;
      }
      peer.resize(size);
      std::memcpy(peer.data(), &address, size);
      break;
    }
    // A connection reset while it waited: take the next one (as Asio does).
    if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return AcceptOutcome::kWouldBlock;
    ec = SystemError(errno);
    return AcceptOutcome::kFailed;
  }
  return Adopt(socket, peer.protocol(), fd, ec) ? AcceptOutcome::kAccepted
                                                : AcceptOutcome::kFailed;
}

bool ReadMayFindData(TcpSocket& socket) {
  auto& impl = socket_internals_detail::SocketAccess::Implementation(socket);
  if (impl.reactor_data_ == nullptr) return true;
  socket_internals_detail::ReadProbe probe{impl.reactor_data_};
  asio::detail::object_pool_access::destroy(&probe);
  return probe.may_find_data;
}

void NoteReadOutcome(TcpSocket& socket, bool exhausted) {
  auto& impl = socket_internals_detail::SocketAccess::Implementation(socket);
  if (impl.reactor_data_ == nullptr) return;
  socket_internals_detail::ReadMark mark{impl.reactor_data_, !exhausted};
  asio::detail::object_pool_access::destroy(&mark);
}

}  // namespace tollgate::gateway

#else  // not the Asio these internals are known for

namespace tollgate::gateway {

ConnectStart StartConnect(TcpSocket&, const tcp::endpoint&, ErrorCode&) {
  return ConnectStart::kUnsupported;
}

AcceptOutcome AcceptNow(Acceptor&, TcpSocket&, tcp::endpoint&, ErrorCode&) {
  return AcceptOutcome::kUnsupported;
}

bool ReadMayFindData(TcpSocket&) { return true; }

void NoteReadOutcome(TcpSocket&, bool) {}

}  // namespace tollgate::gateway

#endif
