// ws_recvcost: what one receive of a small message costs the kernel, by the
// system call that makes it: recvfrom() (nginx's recv()), recvmsg() without
// control data, and recvmsg() with TCP_INQ's control message (tollgate's
// DrainingRead, gateway/io/draining_read.h, which needs the count of bytes
// left queued to skip the read that would find nothing). A relayed
// WebSocket message is two receives and two sends in either proxy
// (bench/websocket.sh --syscalls), so this per-call difference is most of
// what separates their system time per message.
//
// One loopback TCP connection; each iteration sends `size` bytes from one
// end (TCP_NODELAY) and times the receive of them at the other (the data is
// queued by the time send() returns: loopback delivers in the sender's
// context). The modes run in alternating rounds; per mode the median over
// rounds of the mean nanoseconds per receive (wall clock around the call
// only, so a machine busy with other work inflates all modes alike).
//
// Not part of the CMake build (no dependencies):
//   g++ -O2 -std=c++20 -o /tmp/ws_recvcost bench/ws_recvcost.cc
//   /tmp/ws_recvcost [rounds=7] [iterations=200000] [size=64]
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

enum Mode { kRecvfrom, kRecvmsg, kRecvmsgInq, kModes };
constexpr const char* kNames[kModes] = {"recvfrom", "recvmsg", "recvmsg+TCP_INQ"};

struct Pair {
  int sender = -1;
  int receiver = -1;
};

Pair Connect(bool inq) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listener, 1) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    std::perror("listen");
    std::exit(1);
  }
  Pair pair;
  pair.sender = ::socket(AF_INET, SOCK_STREAM, 0);
  if (::connect(pair.sender, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    std::perror("connect");
    std::exit(1);
  }
  pair.receiver = ::accept(listener, nullptr, nullptr);
  ::close(listener);
  const int on = 1;
  ::setsockopt(pair.sender, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  if (inq) ::setsockopt(pair.receiver, IPPROTO_TCP, TCP_INQ, &on, sizeof on);
  ::fcntl(pair.receiver, F_SETFL, O_NONBLOCK);
  return pair;
}

// Mean nanoseconds per receive over `iterations` messages of `size` bytes.
double Run(Mode mode, int iterations, std::size_t size) {
  const Pair pair = Connect(mode == kRecvmsgInq);
  std::vector<char> message(size, 'x');
  std::vector<char> buffer(16 * 1024);  // a relay chunk, as the proxies read
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  std::chrono::nanoseconds total{0};
  for (int i = 0; i < iterations; ++i) {
    if (::send(pair.sender, message.data(), size, 0) != static_cast<ssize_t>(size)) {
      std::perror("send");
      std::exit(1);
    }
    const auto start = std::chrono::steady_clock::now();
    ssize_t n = 0;
    if (mode == kRecvfrom) {
      n = ::recvfrom(pair.receiver, buffer.data(), buffer.size(), 0, nullptr, nullptr);
    } else {
      iovec iov{buffer.data(), buffer.size()};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      if (mode == kRecvmsgInq) {
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
      }
      n = ::recvmsg(pair.receiver, &msg, 0);
    }
    total += std::chrono::steady_clock::now() - start;
    if (n != static_cast<ssize_t>(size)) {
      std::fprintf(stderr, "%s: received %zd of %zu bytes\n", kNames[mode], n, size);
      std::exit(1);
    }
  }
  ::close(pair.sender);
  ::close(pair.receiver);
  return static_cast<double>(total.count()) / iterations;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 7;
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 200000;
  const std::size_t size = argc > 3 ? static_cast<std::size_t>(std::atoll(argv[3])) : 64;
  std::vector<double> ns[kModes];
  for (int r = 0; r < rounds; ++r) {
    for (int m = 0; m < kModes; ++m) {
      const Mode mode = static_cast<Mode>(r % 2 == 0 ? m : kModes - 1 - m);
      ns[mode].push_back(Run(mode, iterations, size));
    }
  }
  double base = 0;
  for (int m = 0; m < kModes; ++m) {
    std::sort(ns[m].begin(), ns[m].end());
    const double median = ns[m][ns[m].size() / 2];
    if (m == kRecvfrom) base = median;
    std::printf("%-16s %7.0f ns per %zu-byte receive (median of %d rounds; %+.0f ns vs recvfrom)\n",
                kNames[m], median, size, rounds, median - base);
  }
  return 0;
}
