// The admin listener: /healthz (the process serves), /readyz (listeners
// are up and the store is reachable), /metrics (Prometheus), the status
// page: GET / (HTML) drawing /status.json, and the admin API under /api/. Runs on one worker's io_context;
// every handler is called on that thread.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "gateway/io/net.h"

namespace tollgate::gateway {

class AdminServer {
 public:
  // Whether the gateway is ready, and a JSON object describing its store
  // (e.g. {"kind":"redis","connections_up":2,"circuits_open":0}).
  struct Readiness {
    bool ready = false;
    std::string store_json = "{}";
  };
  struct Handlers {
    std::function<Readiness()> ready;
    std::function<std::string()> metrics;  // the /metrics body; empty: metrics are off (404)
    std::function<std::string()> status;   // the /status.json body; empty: no status page (404)
    std::function<void()> sample;          // called every kSampleInterval while serving
    // Answers the calls under /api/ (gateway/admin/admin_api.h); the second
    // argument is the caller's address ("host:port").
    std::function<Task<http::response<http::string_body>>(const http::request<http::string_body>&,
                                                          std::string_view)>
        api;
  };
  static constexpr std::chrono::seconds kSampleInterval{1};
  AdminServer(asio::io_context& io, Acceptor acceptor, Handlers handlers);

  void Start();
  void Stop();  // closes the acceptor; open admin connections end on their own
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }

 private:
  Task<void> AcceptLoop();
  Task<void> SampleLoop();
  Task<void> Serve(TcpStream stream);
  http::response<http::string_body> Handle(const http::request<http::string_body>& req);

  asio::io_context& io_;
  Acceptor acceptor_;
  Handlers handlers_;
  Timer sample_timer_;
  bool stopped_ = false;
};

}  // namespace tollgate::gateway
