// A small, fast HTTP/1.1 origin server bundled with tollgate: the demo
// upstream of `make run`, the origin of the benchmarks and of the tests.
//   any path            200 "hello from upstream\n"
//   /_test/status/N     status N
//   /_test/sleep/MS     200 after MS milliseconds
//   /_test/knee/MS?capacity=C
//                       an upstream that slows as it fills: 200 after
//                       MS × max(1, n / C) ms, n the /_test/sleep and
//                       /_test/knee requests in flight when it arrived
//                       (itself included; C defaults to 1)
//   /_test/bytes/N      N bytes of body, streamed (chunked with ?chunked)
//   /_test/drip/N?every=MS
//                       N bytes of chunked body, one byte every MS ms
//   /_test/echo         the request body back, streamed
//   /_test/trailers     "hello", chunked, with trailers grpc-status: 0 and
//                       grpc-message: ok
//   /_test/headers      the request headers as JSON
//   /_test/close        200, then closes the connection
//   /_test/usage/N      an OpenAI chat completion (JSON) whose usage says N
//                       tokens in all
//   /_test/limited/B?limit=N&window=MS[&global=1][&unix=1]
//                       a partner API with its own limit: N per fixed window
//                       of MS for bucket B, X-RateLimit-* headers, 429 with
//                       Retry-After beyond (global=1: a global 429 that
//                       blocks every bucket until the window ends; unix=1:
//                       windows aligned on Unix time, as Redis TIME is)
//   /_test/partner-stats per bucket: served, refused, max_in_window; and
//                       the most /_test/sleep and /_test/knee requests in
//                       flight at once
// Each response carries "X-Upstream-Port" so tests can see which server
// answered.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace tollgate::gateway {

class EchoUpstream {
 public:
  // Binds host:port (port 0: any); nullptr with `error` on failure.
  static std::unique_ptr<EchoUpstream> Create(const std::string& host, std::uint16_t port,
                                              int threads, std::string& error);
  ~EchoUpstream();
  void Start();  // serves on its own threads
  void Stop();
  void Wait();
  std::uint16_t port() const;

 private:
  struct Impl;
  explicit EchoUpstream(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tollgate::gateway
