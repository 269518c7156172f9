// How a client connection starts, before its first exchange (the step that
// decides which protocol adapter serves it): the TLS handshake and the
// protocol its ALPN chose, or on a cleartext listener that takes HTTP/2
// whether the client's first bytes are HTTP/2's prior-knowledge preface.
// Worker thread only.
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
