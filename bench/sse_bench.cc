// bench/cost.sh's time to the first event of a streamed chat completion,
// without Python on either side (whose scheduling noise is of the order of
// the figure itself):
//
//   sse_bench serve PORT
//     an OpenAI-shaped streaming upstream on 127.0.0.1:PORT: each POST is
//     answered 200 text/event-stream, chunked, with its first event at
//     once (its own write), then 15 more chunks, then a usage event (5
//     prompt, 16 completion tokens) and [DONE]; keep-alive. A thread per
//     connection, blocking sockets: the least work and the least wake-up
//     latency per event.
//   sse_bench ttfb PORT N [--new-connections]
//     N chat completion requests ("stream": true) one after another to
//     127.0.0.1:PORT, each read to its end; prints
//     "p50_ms=A p90_ms=B" of the time from sending a request to reading
//     its first "data:" line. With --new-connections each request has a
//     connection of its own (Connection: close), else one kept-alive
//     connection carries them all.
//
// A tool, not the product: errors end the process with a message.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

[[noreturn]] void Die(const char* what) {
  std::perror(what);
  std::exit(1);
}

sockaddr_in Loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

void NoDelay(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return;  // the peer left: its reader sees the close
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

std::string Chunk(std::string_view payload) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", payload.size());
  return std::string(size) + std::string(payload) + "\r\n";
}

std::string Event(std::string_view json) { return Chunk("data: " + std::string(json) + "\n\n"); }

// One connection of `serve`: requests with a Content-Length body, answered
// as the header comment says, until the client closes.
void ServeConnection(int fd) {
  NoDelay(fd);
  static const std::string kHead =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  static const std::string kFirst = Event(
      R"({"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})");
  static const std::string kToken = Event(
      R"({"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"}}]})");
  static const std::string kTail =
      Event(
          R"({"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":16,"total_tokens":21}})") +
      Event("[DONE]") + "0\r\n\r\n";
  std::string in;
  char buffer[65536];
  for (;;) {
    std::size_t head_end;
    while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
      const ssize_t n = recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) {
        close(fd);
        return;
      }
      in.append(buffer, static_cast<std::size_t>(n));
    }
    std::size_t length = 0;
    std::string lower = in.substr(0, head_end);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (const std::size_t at = lower.find("content-length:"); at != std::string::npos) {
      length = std::strtoul(lower.c_str() + at + 15, nullptr, 10);
    }
    const std::size_t total = head_end + 4 + length;
    while (in.size() < total) {
      const ssize_t n = recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) {
        close(fd);
        return;
      }
      in.append(buffer, static_cast<std::size_t>(n));
    }
    in.erase(0, total);
    SendAll(fd, kHead + kFirst);
    for (int i = 0; i < 15; ++i) SendAll(fd, kToken);
    SendAll(fd, kTail);
  }
}

int Serve(int port) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a = Loopback(port);
  if (bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) Die("bind");
  if (listen(listener, 1024) != 0) Die("listen");
  for (;;) {
    const int fd = accept(listener, nullptr, nullptr);
    if (fd < 0) continue;
    std::thread(ServeConnection, fd).detach();
  }
}

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = Loopback(port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) Die("connect");
  NoDelay(fd);
  return fd;
}

int Ttfb(int port, int n, bool fresh) {
  const std::string body =
      R"({"model":"gpt-4o-mini","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"Say hi."}]})";
  const std::string request =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: bench\r\nX-Team: bench\r\n"
      "Content-Type: application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n" + (fresh ? "Connection: close\r\n" : "") + "\r\n" + body;
  std::vector<double> times;
  char buffer[65536];
  int fd = -1;
  for (int i = 0; i < n; ++i) {
    if (fd < 0) fd = Connect(port);
    const auto start = std::chrono::steady_clock::now();
    SendAll(fd, request);
    std::string seen;
    while (seen.find("data:") == std::string::npos) {
      const ssize_t got = recv(fd, buffer, sizeof buffer, 0);
      if (got <= 0) Die("the connection closed before the first event");
      seen.append(buffer, static_cast<std::size_t>(got));
    }
    times.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    // The rest of the stream, as a client reads it.
    if (fresh) {
      while (recv(fd, buffer, sizeof buffer, 0) > 0) {
      }
      close(fd);
      fd = -1;
      continue;
    }
    while (seen.size() < 5 || seen.compare(seen.size() - 5, 5, "0\r\n\r\n") != 0) {
      const ssize_t got = recv(fd, buffer, sizeof buffer, 0);
      if (got <= 0) Die("the connection closed within a response");
      seen.append(buffer, static_cast<std::size_t>(got));
    }
  }
  std::sort(times.begin(), times.end());
  const double p50 = times.size() % 2 ? times[times.size() / 2]
                                      : (times[times.size() / 2 - 1] + times[times.size() / 2]) / 2;
  std::printf("p50_ms=%.3f p90_ms=%.3f\n", p50, times[times.size() * 9 / 10]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string_view mode = argc > 1 ? argv[1] : "";
  if (mode == "serve" && argc == 3) return Serve(std::atoi(argv[2]));
  if (mode == "ttfb" && (argc == 4 || argc == 5)) {
    const bool fresh = argc == 5 && std::string_view(argv[4]) == "--new-connections";
    return Ttfb(std::atoi(argv[2]), std::atoi(argv[3]), fresh);
  }
  std::fprintf(stderr, "usage: sse_bench serve PORT | sse_bench ttfb PORT N [--new-connections]\n");
  return 2;
}
