// ws_relay_probe: what a WebSocket tunnel's byte relay costs per message
// with an epoll loop like nginx's and with io_uring, in one program, to tell
// whether an io_uring relay engine in tollgate is worth building
// (tollgate's tunnels spend ~94% of their CPU per message in the kernel, with
// the same 2 receives and 2 sends per message as nginx).
//
// A plain TCP relay, one thread: it accepts client connections on --listen,
// connects each to --upstream, and copies bytes both ways until both sides
// have ended (an end of stream is passed on as shutdown(SHUT_WR)). It knows
// nothing of HTTP or WebSocket: bench/ws_load's handshake and messages pass
// through as bytes to bench/ws_echo. Both sockets get TCP_NODELAY, as nginx's
// upgraded connections do. Each direction has its own 16 KiB buffer.
//
// --mode epoll: nginx's way (ngx_http_upstream_process_upgraded on its epoll
//   module): both sockets registered once, EPOLLIN|EPOLLOUT|EPOLLRDHUP|
//   EPOLLET; a readable side is read with recvfrom() and what came is sent
//   at once with send(); a short read marks the side not ready unless the
//   event said EPOLLRDHUP (the peer's end of stream is queued), so each
//   message costs one receive and one send per direction.
// --mode uring: per direction one receive in flight into that direction's
//   buffer; when it completes, one send of what came; when that completes,
//   the next receive. Every SQE queued during a loop turn is submitted by the
//   turn's single io_uring_enter (io_uring_submit_and_wait). A receive whose
//   completion lacked IORING_CQE_F_SOCK_NONEMPTY left the socket empty, so
//   the next one is queued with IORING_RECVSEND_POLL_FIRST (arm the poll at
//   once instead of a receive that would find nothing), unless --no-poll-first.
//   --multishot: instead, per direction one multishot receive
//   (IORING_RECV_MULTISHOT) into buffers the kernel picks from a provided
//   buffer ring, armed once for the tunnel's life (no re-arm per message);
//   the received buffers are sent in order, one send in flight per direction.
//   --ring-flags: defer (SINGLE_ISSUER|DEFER_TASKRUN, the default), coop
//   (COOP_TASKRUN|TASKRUN_FLAG), none.
//
// Not part of the CMake build (needs liburing-dev):
//   g++ -O2 -std=c++20 -o /tmp/ws_relay_probe bench/ws_relay_probe.cc -luring
//   /tmp/ws_relay_probe --listen PORT --upstream PORT --mode epoll|uring
//       [--ring-flags defer|coop|none] [--no-poll-first] [--multishot]
// bench/ws_relay_probe.sh runs it against nginx in alternating rounds; the
// figures (no engine cut the CPU per message by more than a few percent) are
// in bench/RESULTS.md, after the WebSocket section.
#include <arpa/inet.h>
#include <fcntl.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <sys/mman.h>
#include <string>

namespace {

constexpr std::size_t kBufferSize = 16 * 1024;

[[noreturn]] void Die(const char* what) {
  std::perror(what);
  std::exit(1);
}

int Listen(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) Die("bind");
  if (::listen(fd, 1024) != 0) Die("listen");
  return fd;
}

// A blocking connect on loopback (immediate), then the socket is set up.
int ConnectUpstream(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) Die("connect");
  return fd;
}

void Prepare(int fd, bool non_blocking) {
  const int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  if (non_blocking) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

// ---------------------------------------------------------------- epoll

struct EpollTunnel;

struct EpollSide {
  EpollTunnel* tunnel;
  int fd = -1;
  bool readable = false;  // edge seen, not yet drained
  bool writable = true;
  bool rdhup = false;     // the peer's end of stream is queued
  bool eof = false;       // read returned 0
};

struct EpollTunnel {
  EpollSide side[2];
  // Direction d copies side[d] -> side[1 - d] through buffer[d].
  char buffer[2][kBufferSize];
  std::size_t start[2] = {0, 0};
  std::size_t end[2] = {0, 0};
  bool shut[2] = {false, false};  // side[1 - d] got SHUT_WR
  bool dead = false;
};

// One direction as nginx's upgraded handler does it: send what is held while
// the destination takes it; read while the source is ready and nothing is
// held. Returns false on an error (the tunnel is closed).
bool EpollPump(EpollTunnel& t, int d) {
  EpollSide& src = t.side[d];
  EpollSide& dst = t.side[1 - d];
  for (;;) {
    if (t.start[d] < t.end[d]) {
      if (!dst.writable) return true;
      const ssize_t n = ::send(dst.fd, t.buffer[d] + t.start[d], t.end[d] - t.start[d], 0);
      if (n < 0) {
        if (errno == EAGAIN) {
          dst.writable = false;
          return true;
        }
        return false;
      }
      t.start[d] += static_cast<std::size_t>(n);
      continue;
    }
    t.start[d] = t.end[d] = 0;
    if (src.eof) {
      if (!t.shut[d]) {
        ::shutdown(dst.fd, SHUT_WR);
        t.shut[d] = true;
      }
      return true;
    }
    if (!src.readable) return true;
    const ssize_t n = ::recvfrom(src.fd, t.buffer[d], kBufferSize, 0, nullptr, nullptr);
    if (n < 0) {
      if (errno == EAGAIN) {
        src.readable = false;
        return true;
      }
      return false;
    }
    if (n == 0) {
      src.eof = true;
      continue;
    }
    t.end[d] = static_cast<std::size_t>(n);
    // nginx's short-read rule: the queue is empty unless an end of stream
    // is pending behind the data.
    if (static_cast<std::size_t>(n) < kBufferSize && !src.rdhup) src.readable = false;
  }
}

void RunEpoll(int listener, int upstream_port) {
  const int ep = ::epoll_create1(0);
  epoll_event listen_event{};
  listen_event.events = EPOLLIN;
  listen_event.data.ptr = nullptr;
  ::epoll_ctl(ep, EPOLL_CTL_ADD, listener, &listen_event);
  epoll_event events[512];
  for (;;) {
    const int count = ::epoll_wait(ep, events, 512, -1);
    if (count < 0) {
      if (errno == EINTR) continue;
      Die("epoll_wait");
    }
    for (int i = 0; i < count; ++i) {
      auto* side = static_cast<EpollSide*>(events[i].data.ptr);
      if (side == nullptr) {
        const int client = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK);
        if (client < 0) continue;
        auto* t = new EpollTunnel;
        t->side[0].tunnel = t->side[1].tunnel = t;
        t->side[0].fd = client;
        t->side[1].fd = ConnectUpstream(upstream_port);
        Prepare(t->side[0].fd, true);
        Prepare(t->side[1].fd, true);
        for (auto& s : t->side) {
          epoll_event e{};
          e.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
          e.data.ptr = &s;
          ::epoll_ctl(ep, EPOLL_CTL_ADD, s.fd, &e);
        }
        continue;
      }
      EpollTunnel& t = *side->tunnel;
      if (t.dead) continue;
      const uint32_t e = events[i].events;
      if (e & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP)) side->readable = true;
      if (e & EPOLLRDHUP) side->rdhup = true;
      if (e & (EPOLLOUT | EPOLLERR | EPOLLHUP)) side->writable = true;
      if (!EpollPump(t, 0) || !EpollPump(t, 1) || (t.shut[0] && t.shut[1])) {
        // Closed with its events of this batch possibly still listed: the
        // tunnel is leaked on purpose (a benchmark closes few).
        t.dead = true;
        ::close(t.side[0].fd);
        ::close(t.side[1].fd);
      }
    }
  }
}

// ---------------------------------------------------------------- io_uring

struct UringTunnel;

enum OpKind : uint64_t { kRecv = 0, kSend = 1, kAccept = 2 };

struct UringDirection {
  UringTunnel* tunnel;
  int index;  // d: side[d] -> side[1 - d]
  char buffer[kBufferSize];
  std::size_t start = 0;
  std::size_t end = 0;
  bool nonempty = true;  // the last receive left data queued (or none yet)
  bool done = false;     // end of stream passed on
  // --multishot: the provided buffers received and not yet sent, in order
  // (buffer id, length); the front one is being sent from `start`.
  std::deque<std::pair<uint16_t, uint32_t>> queued;
  bool sending = false;
  bool armed = false;    // the multishot receive is armed
  bool eof = false;      // it reported the end of stream
} __attribute__((aligned(8)));

struct UringTunnel {
  int fd[2] = {-1, -1};
  UringDirection direction[2];
  int in_flight = 0;
  bool failed = false;
};

constexpr unsigned kProvided = 1024;  // --multishot: provided buffers
constexpr int kGroup = 0;

struct Uring {
  io_uring ring;
  bool poll_first = true;
  bool multishot = false;
  io_uring_buf_ring* provided = nullptr;
  char* provided_memory = nullptr;
  int listener = -1;
  int upstream_port = 0;

  io_uring_sqe* Sqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    if (sqe == nullptr) {
      io_uring_submit(&ring);
      sqe = io_uring_get_sqe(&ring);
      if (sqe == nullptr) Die("io_uring_get_sqe");
    }
    return sqe;
  }

  void QueueAccept() {
    io_uring_sqe* sqe = Sqe();
    io_uring_prep_accept(sqe, listener, nullptr, nullptr, 0);
    io_uring_sqe_set_data64(sqe, kAccept);
  }

  void SetUpProvided() {
    const std::size_t ring_bytes = kProvided * sizeof(io_uring_buf);
    void* ring_memory = ::mmap(nullptr, ring_bytes, PROT_READ | PROT_WRITE,
                               MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    if (ring_memory == MAP_FAILED) Die("mmap");
    provided = static_cast<io_uring_buf_ring*>(ring_memory);
    io_uring_buf_ring_init(provided);
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<uint64_t>(ring_memory);
    reg.ring_entries = kProvided;
    reg.bgid = kGroup;
    const int rc = io_uring_register_buf_ring(&ring, &reg, 0);
    if (rc < 0) {
      errno = -rc;
      Die("io_uring_register_buf_ring");
    }
    provided_memory = new char[kProvided * kBufferSize];
    for (unsigned i = 0; i < kProvided; ++i) GiveBack(static_cast<uint16_t>(i), i);
    io_uring_buf_ring_advance(provided, static_cast<int>(kProvided));
  }

  // Buffer `bid` back to the kernel at ring offset `offset` (advance after).
  void GiveBack(uint16_t bid, unsigned offset) {
    io_uring_buf_ring_add(provided, provided_memory + std::size_t{bid} * kBufferSize, kBufferSize,
                          bid, io_uring_buf_ring_mask(kProvided), static_cast<int>(offset));
  }

  void QueueMultishot(UringDirection& dir) {
    UringTunnel& t = *dir.tunnel;
    io_uring_sqe* sqe = Sqe();
    io_uring_prep_recv_multishot(sqe, t.fd[dir.index], nullptr, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = kGroup;
    io_uring_sqe_set_data64(sqe, reinterpret_cast<uint64_t>(&dir) | kRecv);
    dir.armed = true;
    ++t.in_flight;
  }

  // --multishot: sends the front of dir.queued unless one is under way.
  void SendQueued(UringDirection& dir) {
    UringTunnel& t = *dir.tunnel;
    if (dir.sending) return;
    if (dir.queued.empty()) {
      if (dir.eof && !dir.done) {
        ::shutdown(t.fd[1 - dir.index], SHUT_WR);
        dir.done = true;
      }
      return;
    }
    const auto [bid, length] = dir.queued.front();
    io_uring_sqe* sqe = Sqe();
    io_uring_prep_send(sqe, t.fd[1 - dir.index],
                       provided_memory + std::size_t{bid} * kBufferSize + dir.start,
                       length - dir.start, MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, reinterpret_cast<uint64_t>(&dir) | kSend);
    dir.sending = true;
    ++t.in_flight;
  }

  void CompleteMultishot(UringDirection& dir, io_uring_cqe* cqe, bool recv) {
    UringTunnel& t = *dir.tunnel;
    const int res = cqe->res;
    if (recv) {
      if (!(cqe->flags & IORING_CQE_F_MORE)) {
        dir.armed = false;
      } else {
        ++t.in_flight;  // still armed: the decrement above was early
      }
      if (res > 0) {
        const auto bid = static_cast<uint16_t>(cqe->flags >> IORING_CQE_BUFFER_SHIFT);
        dir.queued.emplace_back(bid, static_cast<uint32_t>(res));
        if (!dir.armed && !t.failed) QueueMultishot(dir);
        SendQueued(dir);
      } else if (res == 0) {
        dir.eof = true;
        SendQueued(dir);
      } else if (res == -ENOBUFS) {
        if (!dir.armed) QueueMultishot(dir);  // a crude retry
      } else {
        Fail(t);
      }
      return;
    }
    dir.sending = false;
    if (res < 0) {
      Fail(t);
      return;
    }
    dir.start += static_cast<std::size_t>(res);
    if (dir.start == dir.queued.front().second) {
      GiveBack(dir.queued.front().first, 0);
      io_uring_buf_ring_advance(provided, 1);
      dir.queued.pop_front();
      dir.start = 0;
    }
    SendQueued(dir);
  }

  void QueueRecv(UringDirection& dir) {
    if (multishot) {
      QueueMultishot(dir);
      return;
    }
    UringTunnel& t = *dir.tunnel;
    io_uring_sqe* sqe = Sqe();
    io_uring_prep_recv(sqe, t.fd[dir.index], dir.buffer, kBufferSize, 0);
    if (poll_first && !dir.nonempty) sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;
    io_uring_sqe_set_data64(sqe, reinterpret_cast<uint64_t>(&dir) | kRecv);
    ++t.in_flight;
  }

  void QueueSend(UringDirection& dir) {
    UringTunnel& t = *dir.tunnel;
    io_uring_sqe* sqe = Sqe();
    io_uring_prep_send(sqe, t.fd[1 - dir.index], dir.buffer + dir.start, dir.end - dir.start,
                       MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, reinterpret_cast<uint64_t>(&dir) | kSend);
    ++t.in_flight;
  }

  void Fail(UringTunnel& t) {
    if (t.failed) return;
    t.failed = true;
    // Pending operations complete (with 0 or an error) once both sockets
    // are shut down; the tunnel is freed after the last.
    ::shutdown(t.fd[0], SHUT_RDWR);
    ::shutdown(t.fd[1], SHUT_RDWR);
  }

  void MaybeFree(UringTunnel& t) {
    if (t.in_flight > 0) return;
    if (!t.failed && !(t.direction[0].done && t.direction[1].done)) return;
    ::close(t.fd[0]);
    ::close(t.fd[1]);
    delete &t;
  }

  void Complete(io_uring_cqe* cqe) {
    const uint64_t data = io_uring_cqe_get_data64(cqe);
    if (data == kAccept) {
      if (cqe->res >= 0) {
        auto* t = new UringTunnel;
        t->fd[0] = cqe->res;
        t->fd[1] = ConnectUpstream(upstream_port);
        Prepare(t->fd[0], false);
        Prepare(t->fd[1], false);
        for (int d = 0; d < 2; ++d) {
          t->direction[d].tunnel = t;
          t->direction[d].index = d;
          QueueRecv(t->direction[d]);
        }
      }
      QueueAccept();
      return;
    }
    auto& dir = *reinterpret_cast<UringDirection*>(data & ~uint64_t{7});
    UringTunnel& t = *dir.tunnel;
    --t.in_flight;
    const int res = cqe->res;
    if (t.failed) {
      if ((data & 7) == kRecv && (cqe->flags & IORING_CQE_F_MORE)) ++t.in_flight;
      if ((data & 7) == kRecv && res > 0) {  // a provided buffer to give back
        GiveBack(static_cast<uint16_t>(cqe->flags >> IORING_CQE_BUFFER_SHIFT), 0);
        io_uring_buf_ring_advance(provided, 1);
      }
      MaybeFree(t);
      return;
    }
    if (multishot) {
      CompleteMultishot(dir, cqe, (data & 7) == kRecv);
      MaybeFree(t);
      return;
    }
    if ((data & 7) == kRecv) {
      if (res < 0) {
        Fail(t);
      } else if (res == 0) {
        ::shutdown(t.fd[1 - dir.index], SHUT_WR);
        dir.done = true;
      } else {
        dir.nonempty = (cqe->flags & IORING_CQE_F_SOCK_NONEMPTY) != 0;
        dir.start = 0;
        dir.end = static_cast<std::size_t>(res);
        QueueSend(dir);
      }
    } else {
      if (res < 0) {
        Fail(t);
      } else {
        dir.start += static_cast<std::size_t>(res);
        if (dir.start < dir.end) {
          QueueSend(dir);
        } else {
          QueueRecv(dir);
        }
      }
    }
    MaybeFree(t);
  }
};

void RunUring(int listener, int upstream_port, unsigned flags, bool poll_first, bool multishot) {
  Uring u;
  u.poll_first = poll_first;
  u.multishot = multishot;
  u.listener = listener;
  u.upstream_port = upstream_port;
  io_uring_params params{};
  params.flags = flags;
  const int rc = io_uring_queue_init_params(1024, &u.ring, &params);
  if (rc < 0) {
    errno = -rc;
    Die("io_uring_queue_init_params");
  }
  if (multishot) u.SetUpProvided();
  u.QueueAccept();
  for (;;) {
    const int submitted = io_uring_submit_and_wait(&u.ring, 1);
    if (submitted < 0 && submitted != -EINTR) {
      errno = -submitted;
      Die("io_uring_submit_and_wait");
    }
    io_uring_cqe* cqe;
    unsigned head;
    unsigned seen = 0;
    io_uring_for_each_cqe(&u.ring, head, cqe) {
      u.Complete(cqe);
      ++seen;
    }
    io_uring_cq_advance(&u.ring, seen);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int listen_port = 0;
  int upstream_port = 0;
  std::string mode = "epoll";
  std::string ring_flags = "defer";
  bool poll_first = true;
  bool multishot = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--no-poll-first") {
      poll_first = false;
      continue;
    }
    if (flag == "--multishot") {
      multishot = true;
      continue;
    }
    if (i + 1 >= argc) break;
    const std::string value = argv[++i];
    if (flag == "--listen") listen_port = std::atoi(value.c_str());
    else if (flag == "--upstream") upstream_port = std::atoi(value.c_str());
    else if (flag == "--mode") mode = value;
    else if (flag == "--ring-flags") ring_flags = value;
  }
  if (listen_port == 0 || upstream_port == 0 || (mode != "epoll" && mode != "uring")) {
    std::fprintf(stderr,
                 "usage: ws_relay_probe --listen PORT --upstream PORT --mode epoll|uring "
                 "[--ring-flags defer|coop|none] [--no-poll-first] [--multishot]\n");
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);
  const int listener = Listen(listen_port);
  if (mode == "epoll") {
    RunEpoll(listener, upstream_port);
  } else {
    unsigned flags = 0;
    if (ring_flags == "defer") flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    if (ring_flags == "coop") flags = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
    RunUring(listener, upstream_port, flags, poll_first, multishot);
  }
}
