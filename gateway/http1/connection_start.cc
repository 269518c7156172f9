#include "gateway/http1/connection_start.h"

#include <string>
#include <utility>

#include "gateway/core/gateway_state.h"
#include "gateway/h2/adapter.h"
#include "gateway/http1/connection.h"
#include "gateway/http1/exchange_work.h"
#include "gateway/http2/types.h"
#include "gateway/io/handshake_failure.h"
#include "gateway/io/relay.h"
#include "gateway/io/tls.h"
#include "gateway/serve/client.h"
#include "gateway/telemetry/thread_metrics.h"

namespace tollgate::gateway {

Task<TlsStart> StartTls(TlsStream& tls, std::chrono::milliseconds timeout,
                        const HandshakeWitness& witness) {
  TlsStart start;
  SSL* ssl = tls.native_handle();
  SSL_set_num_tickets(ssl, 0);
  tls.next_layer().expires_after(timeout);
  auto [ec] = co_await tls.async_handshake(ssl::stream_base::server, kUseTuple);
  const HandshakeResult result = ec ? HandshakeResult::kFailed : Finished(ssl);
  if (witness.metrics != nullptr) witness.metrics->RecordTlsHandshake(witness.metric_listener, result);
  if (ec) {
    const HandshakeFailureInfo failure = ExplainHandshakeFailure(ssl, ec);
    if (witness.metrics != nullptr) {
      witness.metrics->RecordTlsHandshakeFailure(witness.metric_listener, failure.reason);
    }
    const std::vector<const rules::ListenerConfig*> listeners = BoundListeners(*witness.config);
    LogHandshakeFailure(failure, witness.peer_ip,
                        witness.listener < listeners.size()
                            ? listeners[witness.listener]->address.ToString()
                            : "",
                        witness.clock->NowMs());
    co_return start;
  }
  start.ok = true;
  start.tickets_owed = TicketsOwed(ssl, result);
  start.client_cert = VerifiedClientCertificate(ssl);
  const unsigned char* alpn = nullptr;
  unsigned int alpn_size = 0;
  SSL_get0_alpn_selected(ssl, &alpn, &alpn_size);
  start.http2 = std::string_view(reinterpret_cast<const char*>(alpn), alpn_size) == "h2";
  co_return start;
}

Task<bool> ReadsHttp2Preface(AnyStream& stream, beast::flat_buffer& buffer, ErrorCode& ec) {
  const auto bytes = [&] {
    return std::string_view(static_cast<const char*>(buffer.data().data()), buffer.size());
  };
  PrefaceMatch match = MatchHttp2Preface(bytes());
  while (match == PrefaceMatch::kPrefix) {
    auto [read_ec, n] = co_await std::visit(
        [&](auto& s) { return s.async_read_some(buffer.prepare(kRelayChunk), kUseTuple); },
        stream);
    if (read_ec) {
      ec = read_ec;
      co_return false;
    }
    buffer.commit(n);
    match = MatchHttp2Preface(bytes());
  }
  co_return match == PrefaceMatch::kYes;
}

namespace {

// The connection while the start step runs, registered with the worker
// from its accept: a drain ends it while it waits for the client (the TLS
// handshake, the first bytes), not while the client is sending the h2c
// preface (its request or GOAWAY is answered, as in an exchange).
class Starting final : public ClientConnection {
 public:
  explicit Starting(AcceptedClient client) : client_(std::move(client)) {
    client_.count.Serve(this);
  }
  void CloseIfIdle() override {
    if (waiting_) Lowest(client_.stream).cancel();
  }
  bool CloseIfIdleKeepAlive() override { return false; }

  AcceptedClient& client() { return client_; }
  void StopWaiting() { waiting_ = false; }

 private:
  AcceptedClient client_;
  bool waiting_ = true;
};

// Waits (within client_header) for the first bytes of a cleartext
// connection and reads them into `work`; false when none came (closed,
// timed out, drained).
Task<bool> ReadFirstBytes(Worker& worker, AnyStream& stream, const rules::Config& config,
                          std::unique_ptr<ExchangeWork>& work) {
  Lowest(stream).expires_after(std::chrono::milliseconds(config.timeouts.client_header_ms));
  for (;;) {
    auto [ec, unused] = co_await Lowest(stream).async_wait_readable(kUseTuple);
    if (!ec && ReadRequestStart(stream, work, worker.services(),
                                static_cast<std::size_t>(config.limits.max_header_bytes), ec)) {
      co_return !ec;
    }
    // A drain that came while this wait's completion was queued found
    // nothing to cancel.
    if (ec || worker.draining()) co_return false;
  }
}

Task<void> Start(Worker& worker, std::unique_ptr<Starting> starting) {
  AcceptedClient& client = starting->client();
  const std::shared_ptr<Generation> generation = worker.Current();
  const rules::Config& config = *generation->state->config;
  std::unique_ptr<ExchangeWork> first;  // the first request's first bytes
  std::string preface;                  // HTTP/2's, read by the start step
  bool http2 = false;
  if (auto* tls = std::get_if<TlsStream>(&client.stream)) {
    const HandshakeWitness witness{worker.metrics(), client.count.metric_listener(),
                                   client.peer_ip,   &config,
                                   client.listener,  generation->state->clock};
    TlsStart start = co_await StartTls(
        *tls, std::chrono::milliseconds(config.timeouts.client_header_ms), witness);
    if (!start.ok) co_return;
    client.tickets_owed = start.tickets_owed;
    // Once per connection: every request on it (HTTP/1.1 or HTTP/2) is
    // identified by the same certificate.
    client.client_cert = std::move(start.client_cert);
    http2 = start.http2;
    // HTTP/2's go out at once; HTTP/1.1's with the first response.
    if (http2) IssueTickets(tls->native_handle(), client.tickets_owed);
  } else {
    const bool read = co_await ReadFirstBytes(worker, client.stream, config, first);
    if (!read) {
      if (first) GiveBackExchangeWork(std::move(first));
      co_return;
    }
    starting->StopWaiting();
    ErrorCode ec;
    http2 = co_await ReadsHttp2Preface(client.stream, first->buffer, ec);
    if (ec) {
      GiveBackExchangeWork(std::move(first));
      co_return;
    }
    if (http2) {
      // HTTP/2 reads into a buffer of its thread's (gateway/http2/frame_reader.h):
      // the bytes are copied out and the Work goes back.
      preface.assign(static_cast<const char*>(first->buffer.data().data()), first->buffer.size());
      GiveBackExchangeWork(std::move(first));
    }
  }
  // The adapter's coroutine owns the connection from here; this frame ends.
  Task<void> serve = http2 ? Http2Adapter::Serve(worker, std::move(client), std::move(preface))
                           : Http1Connection::Serve(worker, std::move(client), std::move(first));
  asio::co_spawn(worker.io(), std::move(serve), asio::detached);
}

}  // namespace

Task<void> ServeClient(Worker& worker, AnyStream stream, std::size_t listener,
                       const tcp::endpoint& peer) {
  AcceptedClient client(worker, std::move(stream), listener, peer);
  const rules::Config& config = *worker.Current()->state->config;
  // The decision listener always speaks HTTP/2 too (Envoy's RLS is gRPC).
  const bool may_be_http2 = std::holds_alternative<TlsStream>(client.stream) ||
                            IsDecisionListener(config, listener) ||
                            config.listeners[listener].http2;
  if (!may_be_http2) return Http1Connection::Serve(worker, std::move(client), nullptr);
  // Registered now, before the accept loop goes on (a drain that comes
  // first finds it).
  return Start(worker, std::make_unique<Starting>(std::move(client)));
}

}  // namespace tollgate::gateway
