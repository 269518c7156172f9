// The HTTP/2 protocol adapter: one client connection speaking HTTP/2 (TLS
// with ALPN "h2", or cleartext with prior knowledge), handed over by the
// start step (gateway/http1/connection_start.h). Each stream is one request
// through the pipeline — identify (gateway/core/identify.h), admit
// (gateway/core/admission.h, one Admission per stream: rate rules count
// streams, max_inflight places are taken per stream), forward (to the
// route's HTTP/1.1 upstream, through gateway/core/upstream_call.h), respond
// (gateway/core/respond.h's answers as HTTP/2 responses, or as gRPC
// trailers-only responses for gRPC calls) and log (gateway/core/log.h,
// "HTTP/2.0"). On the decision listener ([decision]) nothing is forwarded:
// a gRPC stream is an Envoy RLS call (gateway/decision/rls_call.h), any
// other asks the check endpoint (gateway/decision/check.h's phases, as over
// HTTP/1.1). The framing, flow control and flood bounds are
// Http2Connection's (connection.h). Lives on one worker thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "gateway/http2/connection.h"
#include "gateway/io/net.h"
#include "gateway/serve/client.h"
#include "gateway/serve/worker.h"

namespace tollgate::rules {
struct Config;
}  // namespace tollgate::rules

namespace tollgate::gateway {

class Worker;

// The connection's bounds and timeouts from the configuration in force
// when it starts: [limits] max_concurrent_streams and max_header_bytes,
// [timeouts] client_idle (no stream) and client_body (each write).
Http2Options Http2OptionsFor(const rules::Config& config);

class Http2Adapter final : public ClientConnection {
 public:
  // Serves `client` (its TLS handshake done) until the connection ends and
  // every stream has been logged; the socket is closed then. `preface`:
  // what the start step read of it (cleartext: the preface at least).
  static Task<void> Serve(Worker& worker, AcceptedClient client, std::string preface);

  Http2Adapter(Worker& worker, AcceptedClient client);
  ~Http2Adapter();
  Http2Adapter(const Http2Adapter&) = delete;
  Http2Adapter& operator=(const Http2Adapter&) = delete;

  // Drain: GOAWAY; streams in flight finish, then the connection closes.
  void CloseIfIdle() override { Drain(); }
  // Drains the connection when no stream is in flight (max_connections
  // makes room with it); true when it did, false when it already drains.
  bool CloseIfIdleKeepAlive() override;

 private:
  // `self` is this adapter, owned by the coroutine.
  Task<void> Run(std::unique_ptr<Http2Adapter> self, std::string preface);
  void Drain();
  friend class StreamExchange;
  Task<void> Serve(Http2Stream& stream);
  // The connection answered 431 itself: logged and counted like any answer.
  void LogHeaderTooLarge();
  // A stream was reset beyond max_stalled_streams: a warning, at most one a
  // minute per worker thread.
  void WarnStallBound();

  Worker& worker_;
  AcceptedClient client_;  // declared before connection_, which uses its stream
  bool served_ = false;    // a stream has started
  bool draining_ = false;  // GOAWAY is on its way
  std::size_t upstreams_held_ = 0;  // HTTP/1.1 upstream connections its streams hold
  Http2Connection connection_;
};

}  // namespace tollgate::gateway
