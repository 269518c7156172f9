// TLS contexts: server side (TLS 1.2+, ALPN h2 and http/1.1, several certificates
// chosen by SNI, client certificates, session resumption) and client side
// towards upstreams (verification, SNI). Built while loading config; errors
// are returned as text. The contexts are immutable after creation and
// shared by all threads (OpenSSL allows that).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gateway/telemetry/handshake_result.h"
#include "gateway/io/net.h"
#include "gateway/io/session_cache.h"
#include "gateway/io/ticket_keys.h"
#include "rules/client_certificate.h"
#include "rules/config.h"
#include "base/clock.h"

namespace tollgate::gateway {

// The application protocols a listener offers in ALPN.
enum class AlpnOffer { kHttp11, kH2AndHttp11 };

// What a listener's sessions resume with, kept from one configuration to
// the next (see ticket_keys.h and session_cache.h).
struct TlsResumption {
  std::shared_ptr<TicketKeys> ticket_keys;
  std::shared_ptr<SessionCache> sessions;
};

// One of a listener's certificates, for the status page and metrics.
struct CertificateInfo {
  std::string file;
  std::string subject;  // RFC 2253
  std::int64_t not_after_unix = 0;
};

// TLS 1.2 sessions kept per listener (SessionCache): about 1-2 KB each.
inline constexpr std::size_t kSessionCacheEntries = 20'000;

class ServerTls {
 public:
  // nullptr and `error` set when a certificate, key, client CA, CRL or
  // ticket key file cannot be used. `previous`: the listener's ServerTls
  // in the configuration before (null at startup), whose resumption state
  // goes on when it still applies. `clock` (rotation of ticket keys) must
  // outlive the contexts.
  static std::unique_ptr<ServerTls> Create(const rules::ListenerConfig& listener, AlpnOffer alpn,
                                           const ServerTls* previous, const store::Clock& clock,
                                           std::string& error);
  ssl::context& context() { return *contexts_.front(); }
  const std::vector<CertificateInfo>& certificates() const { return certificates_; }
  const TlsResumption& resumption() const { return resumption_; }

 private:
  static int OnServerName(SSL* ssl, int* alert, void* arg);
  std::vector<std::unique_ptr<ssl::context>> contexts_;  // first: default
  std::vector<X509*> leaf_;  // not owned; the leaf certificate of each context
  std::vector<CertificateInfo> certificates_;
  TlsResumption resumption_;
};

// After a successful handshake: a full or resumed one.
HandshakeResult Finished(SSL* ssl);

// The TLS 1.3 session tickets OpenSSL would have sent at the end of a
// successful handshake `result` (the context's number after a full one,
// one after a resumption; none with TLS 1.2, whose tickets are part of
// the handshake), for a server connection that turned its own off
// (SSL_set_num_tickets 0) to issue them with SSL_new_session_ticket() at
// a time of its choosing.
int TicketsOwed(SSL* ssl, HandshakeResult result);
// Issues the `owed` tickets (they go out with the next record written, or
// before the next read); `owed` ends at 0, also when OpenSSL refuses one.
void IssueTickets(SSL* ssl, int& owed);

// The client certificate of a finished handshake, if one was sent and
// verified (chain to the listener's client_ca, validity, CRL); null
// otherwise, which a listener with client_cert = "optional" serves
// anonymously.
std::unique_ptr<const rules::ClientCertificate> VerifiedClientCertificate(SSL* ssl);

// To call before a server connection's SSL is freed. OpenSSL drops the
// session of a connection freed without having sent close_notify from the
// cache (ssl_clear_bad_session), so a client that closed first (openssl
// s_client -reconnect, many HTTP clients), a timeout or a drain would lose
// its TLS 1.2 session ID. As nginx does (ngx_ssl_shutdown), a connection
// whose handshake finished counts as shut down: a fatal alert has already
// removed the session of a connection that failed.
void KeepSessionOnClose(SSL* ssl);

// An upstream connection's handshake (client side, peer verification on)
// fails unless the server's certificate is for `name`: a DNS name (a
// wildcard in the left-most label matches) or an IP address, as
// asio::ssl::host_name_verification checks, here by OpenSSL itself. False
// when `name` cannot be checked (empty, or an address OpenSSL does not
// take): the connection must not go on.
bool VerifyPeerName(SSL* ssl, const std::string& name);

std::unique_ptr<ssl::context> CreateClientTls(const rules::UpstreamTlsConfig& config,
                                              std::string& error);

}  // namespace tollgate::gateway
