// send(2) and recvmsg(2) as plain system calls, without glibc's wrappers.
//
// Why: in a process with threads, glibc's send() and recvmsg() are
// cancellation points, and each call turns asynchronous cancellation on and
// off around the system call (__pthread_enable_asynccancel and
// __pthread_disable_asynccancel, ~60 user-space instructions per call under
// callgrind; a single-threaded nginx skips them). tollgate never cancels a
// thread, so syscall(2) does the same work: same arguments, same return
// value, errno set the same way on failure. Thread-safe as the calls are.
#pragma once

#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>

namespace tollgate::gateway {

// send(fd, data, size, flags).
inline ssize_t PlainSend(int fd, const void* data, std::size_t size, int flags) {
  return ::syscall(SYS_sendto, fd, data, size, flags, nullptr, 0);
}

// recvmsg(fd, msg, flags).
inline ssize_t PlainRecvmsg(int fd, msghdr* msg, int flags) {
  return ::syscall(SYS_recvmsg, fd, msg, flags);
}

}  // namespace tollgate::gateway
