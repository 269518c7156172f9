// How a client connection starts, before its first exchange: the step that
// decides which protocol adapter serves it, as Beast's detect_session does.
// Over TLS, the handshake and the protocol its ALPN chose; on a cleartext
// listener that takes HTTP/2 (`http2`, or the decision listener), whether
// the client's first bytes are HTTP/2's prior-knowledge preface. Then the
// HTTP/2 adapter (gateway/h2/adapter.h) or the HTTP/1.1 one
// (gateway/http1/connection.h) owns the connection. Worker thread only.
#pragma once

#include <chrono>
#include <memory>
#include <string_view>

#include "gateway/io/net.h"
#include "base/clock.h"
#include "rules/config.h"
#include "rules/identity.h"

namespace tollgate::gateway {

class ThreadMetrics;
class Worker;

// A ServeConnection (gateway/serve/worker.h): serves an accepted
// connection (`stream`, its TLS handshake not made yet). A cleartext
// listener that takes only HTTP/1.1 goes to the HTTP/1.1 adapter at once
// (the task serves the connection until it ends); otherwise the task is the
// start step, which ends by starting the adapter's own coroutine (so that
// it holds no frame while the connection lives).
Task<void> ServeClient(Worker& worker, AnyStream stream, std::size_t listener,
                       const tcp::endpoint& peer);

// Where a handshake failure is counted and logged (what the log names is
// looked up only then).
struct HandshakeWitness {
  ThreadMetrics* metrics = nullptr;  // null when metrics are off
  int metric_listener = 0;
  std::string_view peer_ip;
  const rules::Config* config = nullptr;  // its listeners name the one accepted on
  std::size_t listener = 0;
  const store::Clock* clock = nullptr;  // the log's rate limit's
};

// What a TLS handshake gave the connection.
struct TlsStart {
  bool ok = false;     // false: it failed (counted by reason and logged)
  bool http2 = false;  // ALPN chose "h2"
  int tickets_owed = 0;  // TLS 1.3 session tickets to issue (tls.h, TicketsOwed)
  // The client certificate it verified; null: none.
  std::unique_ptr<const rules::ClientCertificate> client_cert;
};

// The server side of `tls`'s handshake within `timeout`, OpenSSL's own
// tickets turned off (the connection issues them with its first write).
Task<TlsStart> StartTls(TlsStream& tls, std::chrono::milliseconds timeout,
                        const HandshakeWitness& witness);

// Whether the first bytes, in `buffer` (read from `stream`), are HTTP/2's
// preface, reading more while they may be (within the deadline the stream
// already has). False also when the connection failed meanwhile (`ec`).
Task<bool> ReadsHttp2Preface(AnyStream& stream, beast::flat_buffer& buffer, ErrorCode& ec);

}  // namespace tollgate::gateway
