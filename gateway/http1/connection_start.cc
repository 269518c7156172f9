#include "gateway/http1/connection_start.h"

#include "gateway/core/gateway_state.h"
#include "gateway/http2/connection.h"
#include "gateway/io/handshake_failure.h"
#include "gateway/io/relay.h"
#include "gateway/io/tls.h"
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

}  // namespace tollgate::gateway
