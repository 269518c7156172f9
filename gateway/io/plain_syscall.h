// send(2) and recvmsg(2) as plain system calls, without glibc's wrappers.
//
// Why: in a process with threads, glibc's send() and recvmsg() are
// cancellation points, and each call turns asynchronous cancellation on and
// off around the system call (__pthread_enable_asynccancel and
// __pthread_disable_asynccancel; a single-threaded nginx skips them; their
// cost is in docs/performance.md). tollgate never cancels a
// thread, so syscall(2) does the same work: same arguments, same return
// value, errno set the same way on failure. Thread-safe as the calls are.
// Sanitizer builds keep glibc's calls: ASan checks the buffers and TSan
// orders the threads on either side of a socket in its interceptors, which
// a raw system call would bypass.
#pragma once

#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TOLLGATE_SANITIZED_SOCKET_CALLS 1
#endif

namespace tollgate::gateway {

// send(fd, data, size, flags).
inline ssize_t PlainSend(int fd, const void* data, std::size_t size, int flags) {
#ifdef TOLLGATE_SANITIZED_SOCKET_CALLS
  return ::send(fd, data, size, flags);
#else
  return ::syscall(SYS_sendto, fd, data, size, flags, nullptr, 0);
#endif
}

// recvmsg(fd, msg, flags).
inline ssize_t PlainRecvmsg(int fd, msghdr* msg, int flags) {
#ifdef TOLLGATE_SANITIZED_SOCKET_CALLS
  return ::recvmsg(fd, msg, flags);
#else
  return ::syscall(SYS_recvmsg, fd, msg, flags);
#endif
}

}  // namespace tollgate::gateway
