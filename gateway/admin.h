// The admin listener: /healthz (the process serves) and /readyz (listeners
// are up and the store is reachable). Runs on one worker's io_context; the
// readiness probe is called on that thread.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "gateway/net.h"

namespace tollgate::gateway {

class AdminServer {
 public:
  // Whether the gateway is ready, and a JSON object describing its store
  // (e.g. {"kind":"redis","connections_up":2,"circuits_open":0}).
  struct Readiness {
    bool ready = false;
    std::string store_json = "{}";
  };
  using ReadyProbe = std::function<Readiness()>;
  // The /metrics body; empty function: metrics are off (404).
  using MetricsRenderer = std::function<std::string()>;
  AdminServer(asio::io_context& io, Acceptor acceptor, ReadyProbe ready, MetricsRenderer metrics);

  void Start();
  void Stop();  // closes the acceptor; open admin connections end on their own
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }

 private:
  Task<void> AcceptLoop();
  Task<void> Serve(TcpStream stream);
  http::response<http::string_body> Handle(const http::request<http::string_body>& req);

  asio::io_context& io_;
  Acceptor acceptor_;
  ReadyProbe ready_;
  MetricsRenderer metrics_;
  bool stopped_ = false;
};

}  // namespace tollgate::gateway
