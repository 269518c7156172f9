#include "gateway/io/draining_read.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <boost/asio/error.hpp>
#include <cerrno>
#include <cstring>

#include "gateway/io/plain_syscall.h"

namespace tollgate::gateway {

void EnableDrainingReads(int fd) {
  const int on = 1;
  // A failure only means that reads go on being tried first.
  ::setsockopt(fd, IPPROTO_TCP, TCP_INQ, &on, sizeof on);
}

namespace draining_detail {

bool Receive(int fd, const boost::asio::mutable_buffer& buffer, int flags,
             boost::system::error_code& ec, std::size_t& bytes, int& queued) {
  iovec iov{buffer.data(), buffer.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  for (;;) {
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = PlainRecvmsg(fd, &msg, flags);
    if (n > 0) {
      ec = {};
      bytes = static_cast<std::size_t>(n);
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == IPPROTO_TCP && c->cmsg_type == TCP_CM_INQ) {
          std::memcpy(&queued, CMSG_DATA(c), sizeof queued);
        }
      }
      return true;
    }
    if (n == 0) {
      ec = boost::asio::error::eof;
      bytes = 0;
      return true;
    }
    const int error = errno;
    if (error == EINTR) continue;
    if (error == EAGAIN || error == EWOULDBLOCK) return false;
    ec = boost::system::error_code(error, boost::asio::error::get_system_category());
    bytes = 0;
    return true;
  }
}

}  // namespace draining_detail
}  // namespace tollgate::gateway
