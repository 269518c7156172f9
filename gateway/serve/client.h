// A client connection as the worker accepted it, whatever protocol then
// serves it: its stream, its peer, what its TLS handshake gave, and its
// place in the worker's count (ClientCount). The start step
// (gateway/http1/connection_start.h) hands it to a protocol adapter.
// Worker thread only.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "gateway/io/net.h"
#include "gateway/serve/worker.h"
#include "rules/client_certificate.h"
#include "rules/ip.h"

namespace tollgate::gateway {

// A client connection counted while it lives: in its worker's connections
// (drain, max_connections) and in its listener's connections metric. The
// object serving it (the start step, then a protocol adapter) is the one
// the worker asks to close it: Serve() names it, and the count moves with
// the connection from one to the next.
class ClientCount {
 public:
  ClientCount(Worker& worker, std::size_t listener);
  ClientCount(ClientCount&& other) noexcept;
  ClientCount& operator=(ClientCount&&) = delete;
  ~ClientCount();
  void Serve(ClientConnection* connection);
  int metric_listener() const { return metric_listener_; }

 private:
  Worker* worker_;
  ClientConnection* connection_ = nullptr;
  int metric_listener_ = 0;
};

// What the adapter that serves a client connection takes over.
struct AcceptedClient {
  AcceptedClient(Worker& worker, AnyStream stream, std::size_t listener, const tcp::endpoint& peer);

  ClientCount count;
  AnyStream stream;
  std::size_t listener;
  std::string peer_ip;
  rules::IpAddress peer_address;
  // The client certificate the TLS handshake verified; null: none.
  std::unique_ptr<const rules::ClientCertificate> client_cert;
  // TLS 1.3 session tickets not issued yet (HTTP/1.1 issues them with its
  // first response; the start step issues HTTP/2's at once).
  int tickets_owed = 0;
};

}  // namespace tollgate::gateway
