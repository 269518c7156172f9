// tls_resume_load: resumed TLS handshakes as fast as one thread can make
// them, for bench/tls.sh. `connections` slots each loop: connect, a TLS 1.3
// handshake resuming the slot's newest session (the ticket its last
// connection got), one `GET path` with `Connection: close`, read to the
// server's close, close. The first connection of a slot is a full
// handshake; its later ones offer the newest ticket, so with a server that
// renews tickets every counted connection is a resumption, and the share
// of those that were is printed (SSL_session_reused).
//
// Why not openssl s_time -reuse: it is a blocking client, one connection at
// a time per process; the 4 processes bench/tls.sh runs spend more CPU per
// connection than the server and share its 2 cores, so its rate is largely
// theirs. This client is event-driven (epoll, OpenSSL on the socket, no
// copies), like wrk, which does not say whether a handshake resumed.
//
// With `tls1_2` last, TLS 1.2 instead: the session (ID or ticket) of the
// slot's first connection is resumed with an abbreviated handshake.
//
// Usage: tls_resume_load HOST PORT CONNECTIONS SECONDS [WARMUP_S] [PATH] [tls1_2]
// Prints "connections_per_s connections resumed_share" for the counted
// SECONDS after WARMUP_S (default 1); failures (a connection that got no
// 200) go to stderr and make the exit status 1.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

enum class Phase { kHandshake, kWrite, kRead };

struct Slot {
  int fd = -1;
  SSL* ssl = nullptr;
  SSL_SESSION* session = nullptr;  // newest ticket, offered next time
  Phase phase = Phase::kHandshake;
  bool status_checked = false;
  bool ok = false;
};

struct Totals {
  long connections = 0;
  long resumed = 0;
  long failures = 0;
};

struct Load {
  sockaddr_in address{};
  std::string request;
  SSL_CTX* ctx = nullptr;
  int epoll_fd = -1;
  bool counting = false;
  Totals totals;
};

[[noreturn]] void Die(const char* what) {
  std::perror(what);
  std::exit(2);
}

void Open(Load& load, Slot& slot) {
  slot.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (slot.fd < 0) Die("socket");
  const int on = 1;
  ::setsockopt(slot.fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  if (::connect(slot.fd, reinterpret_cast<const sockaddr*>(&load.address), sizeof load.address) !=
          0 &&
      errno != EINPROGRESS) {
    Die("connect");
  }
  if (slot.ssl == nullptr) {
    slot.ssl = SSL_new(load.ctx);
    if (slot.ssl == nullptr) Die("SSL_new");
  }
  SSL_set_fd(slot.ssl, slot.fd);
  if (slot.session != nullptr) SSL_set_session(slot.ssl, slot.session);
  slot.phase = Phase::kHandshake;
  slot.status_checked = false;
  slot.ok = false;
  // Edge-triggered for both directions: every step below runs until OpenSSL
  // wants the socket, which then raises the next event.
  epoll_event event{};
  event.events = EPOLLIN | EPOLLOUT | EPOLLET;
  event.data.ptr = &slot;
  if (::epoll_ctl(load.epoll_fd, EPOLL_CTL_ADD, slot.fd, &event) != 0) Die("epoll_ctl");
}

// The connection ended (ok or not): counts it, keeps its newest session and
// opens the next.
void Finish(Load& load, Slot& slot) {
  if (load.counting) {
    ++load.totals.connections;
    if (slot.ok && SSL_session_reused(slot.ssl)) ++load.totals.resumed;
    if (!slot.ok) ++load.totals.failures;
  }
  if (slot.ok) {
    SSL_SESSION* newest = SSL_get1_session(slot.ssl);
    if (newest != nullptr) {
      SSL_SESSION_free(slot.session);
      slot.session = newest;
    }
  }
  // Marked shut down without sending a close_notify (the server has closed
  // by then), or SSL_clear would take the session for a broken one and make
  // it unresumable. SSL_clear keeps the object for the next connection.
  SSL_set_shutdown(slot.ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
  SSL_clear(slot.ssl);
  ::close(slot.fd);  // also leaves the epoll set
  Open(load, slot);
}

// Advances `slot` as far as the socket allows. False when it ended.
bool Step(Load& load, Slot& slot) {
  for (;;) {
    int result = 0;
    switch (slot.phase) {
      case Phase::kHandshake:
        result = SSL_connect(slot.ssl);
        if (result == 1) {
          slot.phase = Phase::kWrite;
          continue;
        }
        break;
      case Phase::kWrite:
        result = SSL_write(slot.ssl, load.request.data(), static_cast<int>(load.request.size()));
        if (result > 0) {
          slot.phase = Phase::kRead;
          continue;
        }
        break;
      case Phase::kRead: {
        char buffer[16384];
        result = SSL_read(slot.ssl, buffer, sizeof buffer);
        if (result > 0) {
          if (!slot.status_checked) {
            slot.status_checked = true;
            slot.ok = result >= 12 && std::memcmp(buffer + 9, "200", 3) == 0;
          }
          continue;
        }
        break;
      }
    }
    switch (SSL_get_error(slot.ssl, result)) {
      case SSL_ERROR_WANT_READ:
      case SSL_ERROR_WANT_WRITE:
        return true;
      case SSL_ERROR_ZERO_RETURN:
        // The server's close_notify after its response.
        break;
      default:
        // A close without close_notify after the response counts as done too;
        // anything before the response is a failure (ok stays false).
        ERR_clear_error();
        break;
    }
    if (slot.phase != Phase::kRead) slot.ok = false;
    return false;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr,
                 "usage: tls_resume_load HOST PORT CONNECTIONS SECONDS [WARMUP_S] [PATH] [tls1_2]\n");
    return 2;
  }
  Load load;
  load.address.sin_family = AF_INET;
  load.address.sin_port = htons(static_cast<uint16_t>(std::atoi(argv[2])));
  if (::inet_pton(AF_INET, argv[1], &load.address.sin_addr) != 1) Die("inet_pton");
  const int connections = std::atoi(argv[3]);
  const double seconds = std::atof(argv[4]);
  const double warmup = argc > 5 ? std::atof(argv[5]) : 1.0;
  if (connections <= 0 || seconds <= 0 || warmup < 0) {
    std::fprintf(stderr, "tls_resume_load: CONNECTIONS and SECONDS must be > 0, WARMUP_S >= 0\n");
    return 2;
  }
  const std::string path = argc > 6 ? argv[6] : "/api/hello";
  load.request = "GET " + path + " HTTP/1.1\r\nHost: " + argv[1] + ":" + argv[2] +
                 "\r\nConnection: close\r\n\r\n";

  load.ctx = SSL_CTX_new(TLS_client_method());
  if (load.ctx == nullptr) Die("SSL_CTX_new");
  const bool tls12 = argc > 7 && std::strcmp(argv[7], "tls1_2") == 0;
  const int version = tls12 ? TLS1_2_VERSION : TLS1_3_VERSION;
  SSL_CTX_set_min_proto_version(load.ctx, version);
  SSL_CTX_set_max_proto_version(load.ctx, version);
  SSL_CTX_set_verify(load.ctx, SSL_VERIFY_NONE, nullptr);
  // Sessions are kept per slot, by hand.
  SSL_CTX_set_session_cache_mode(load.ctx, SSL_SESS_CACHE_OFF);

  load.epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  if (load.epoll_fd < 0) Die("epoll_create1");
  std::vector<Slot> slots(static_cast<std::size_t>(connections));
  for (Slot& slot : slots) Open(load, slot);

  const auto start = Clock::now();
  const auto count_from = start + std::chrono::duration<double>(warmup);
  const auto end = count_from + std::chrono::duration<double>(seconds);
  std::vector<epoll_event> events(slots.size());
  for (auto now = start; now < end; now = Clock::now()) {
    if (!load.counting && now >= count_from) load.counting = true;
    const int n = ::epoll_wait(load.epoll_fd, events.data(), static_cast<int>(events.size()), 100);
    if (n < 0 && errno != EINTR) Die("epoll_wait");
    for (int i = 0; i < n; ++i) {
      Slot& slot = *static_cast<Slot*>(events[i].data.ptr);
      if (!Step(load, slot)) Finish(load, slot);
    }
  }
  const double counted = std::chrono::duration<double>(Clock::now() - count_from).count();
  const Totals& t = load.totals;
  std::printf("%.0f %ld %.3f\n", static_cast<double>(t.connections) / counted, t.connections,
              t.connections > 0 ? static_cast<double>(t.resumed) / static_cast<double>(t.connections)
                                : 0.0);
  if (t.failures > 0) {
    std::fprintf(stderr, "tls_resume_load: %ld of %ld connections got no 200\n", t.failures,
                 t.connections);
    return 1;
  }
  return 0;
}
