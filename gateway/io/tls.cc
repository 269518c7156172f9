#include "gateway/io/tls.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>

namespace tollgate::gateway {
namespace {

constexpr const char* kCiphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
// TLS 1.3 in the same order as TLS 1.2 above, AES-128 first (as Go's
// crypto/tls and BoringSSL prefer it), where OpenSSL's default puts
// AES-256-GCM-SHA384 first: the handshake's key schedule and transcript
// then hash with SHA-256 (SHA-NI on current x86) instead of SHA-384, and
// records are sealed with 10 AES rounds instead of 14.
constexpr const char* kTls13Ciphers =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";

std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  char buf[256];
  ERR_error_string_n(code, buf, sizeof(buf));
  return buf;
}

// ALPN protocol lists in wire format (length-prefixed), the server's
// preference first.
constexpr unsigned char kHttp11Only[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
constexpr unsigned char kH2First[] = {2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

// `arg`: the AlpnOffer, cast to a pointer-sized integer.
int SelectAlpn(SSL*, const unsigned char** out, unsigned char* out_len, const unsigned char* in,
               unsigned int in_len, void* arg) {
  const bool h2 = static_cast<AlpnOffer>(reinterpret_cast<std::uintptr_t>(arg)) ==
                  AlpnOffer::kH2AndHttp11;
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, out_len, h2 ? kH2First : kHttp11Only,
                            h2 ? sizeof(kH2First) : sizeof(kHttp11Only), in,
                            in_len) != OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

// With client_cert = "optional" a certificate that does not verify leaves
// the handshake going; VerifiedClientCertificate() then finds no valid one.
int AcceptUnverified(int, X509_STORE_CTX*) { return 1; }

bool AskClientCertificates(SSL_CTX* ctx, const rules::ListenerTlsConfig& options,
                           std::string& error) {
  if (options.client_cert == rules::ClientCertMode::kNone) return true;
  if (SSL_CTX_load_verify_locations(ctx, options.client_ca.c_str(), nullptr) != 1) {
    error = "cannot use client_ca " + options.client_ca + ": " + OpenSslError();
    return false;
  }
  // The CAs named in the CertificateRequest, so clients pick the right one.
  STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(options.client_ca.c_str());
  if (names == nullptr) {
    error = "cannot use client_ca " + options.client_ca + ": " + OpenSslError();
    return false;
  }
  SSL_CTX_set_client_CA_list(ctx, names);
  if (!options.client_crl.empty()) {
    X509_STORE* store = SSL_CTX_get_cert_store(ctx);
    BIO* bio = BIO_new_file(options.client_crl.c_str(), "r");
    int crls = 0;
    while (bio != nullptr) {
      X509_CRL* crl = PEM_read_bio_X509_CRL(bio, nullptr, nullptr, nullptr);
      if (crl == nullptr) break;
      X509_STORE_add_crl(store, crl);
      X509_CRL_free(crl);
      ++crls;
    }
    BIO_free(bio);
    ERR_clear_error();
    if (crls == 0) {
      error = "cannot use client_crl " + options.client_crl + ": no PEM CRL in it";
      return false;
    }
    // The client's own certificate is checked against its issuer's CRL.
    X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK);
  }
  if (options.client_cert == rules::ClientCertMode::kRequire) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, &AcceptUnverified);
  }
  return true;
}

// Sessions resume only under the verification they were made under: the
// session ID context is a digest of the listener's address and its client
// certificate settings, CA and CRL contents included, so a changed CRL (a
// reload) makes clients verify again rather than resume past a revocation.
bool SessionContext(const rules::ListenerConfig& listener, std::string& out, std::string& error) {
  const rules::ListenerTlsConfig& options = listener.tls_options;
  std::string material = listener.address.ToString();
  material += static_cast<char>(options.client_cert);
  for (const std::string* file : {&options.client_ca, &options.client_crl}) {
    if (file->empty()) continue;
    std::ifstream in(*file, std::ios::binary);
    if (!in) {
      error = "cannot read " + *file;
      return false;
    }
    material.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    material += '\0';
  }
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(material.data()), material.size(), digest);
  static_assert(SHA256_DIGEST_LENGTH <= SSL_MAX_SID_CTX_LENGTH);
  out.assign(reinterpret_cast<const char*>(digest), sizeof(digest));
  return true;
}

CertificateInfo Describe(const std::string& file, X509* cert) {
  CertificateInfo info;
  info.file = file;
  if (cert == nullptr) return info;
  if (auto facts = rules::ClientCertificate::FromX509(cert)) info.subject = facts->subject;
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm) == 1) info.not_after_unix = timegm(&tm);
  return info;
}

}  // namespace

std::unique_ptr<ServerTls> ServerTls::Create(const rules::ListenerConfig& listener,
                                             AlpnOffer alpn, const ServerTls* previous,
                                             const store::Clock& clock, std::string& error) {
  const rules::ListenerTlsConfig& options = listener.tls_options;
  auto tls = std::unique_ptr<ServerTls>(new ServerTls());
  if (!options.ticket_key_files.empty()) {
    tls->resumption_.ticket_keys = TicketKeys::FromFiles(options.ticket_key_files, clock, error);
    if (!tls->resumption_.ticket_keys) return nullptr;
  } else {
    const TicketKeys* before = previous != nullptr ? previous->resumption_.ticket_keys.get() : nullptr;
    tls->resumption_.ticket_keys =
        before != nullptr && before->generated() && before->rotation_ms() == options.ticket_rotation_ms
            ? previous->resumption_.ticket_keys
            : TicketKeys::Generated(options.ticket_rotation_ms, clock, before);
  }
  tls->resumption_.sessions = previous != nullptr
                                  ? previous->resumption_.sessions
                                  : std::make_shared<SessionCache>(kSessionCacheEntries);
  std::string session_context;
  if (!SessionContext(listener, session_context, error)) return nullptr;
  for (const rules::CertificateConfig& c : listener.certificates) {
    auto ctx = std::make_unique<ssl::context>(ssl::context::tls_server);
    SSL_CTX* native = ctx->native_handle();
    SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
    SSL_CTX_set_cipher_list(native, kCiphers);
    SSL_CTX_set_ciphersuites(native, kTls13Ciphers);
    SSL_CTX_set_options(
        native, SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_RENEGOTIATION);
    // The chain sent is the certificate file's, as nginx sends it: without
    // this, a full handshake whose file holds no chain builds one from the
    // context's store (the client CAs) each time, X509_verify_cert and all.
    SSL_CTX_set_mode(native, SSL_MODE_NO_AUTO_CHAIN);
    if (SSL_CTX_use_certificate_chain_file(native, c.cert_file.c_str()) != 1) {
      error = "cannot use certificate " + c.cert_file + ": " + OpenSslError();
      return nullptr;
    }
    if (SSL_CTX_use_PrivateKey_file(native, c.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(native) != 1) {
      error = "cannot use private key " + c.key_file + ": " + OpenSslError();
      return nullptr;
    }
    SSL_CTX_set_alpn_select_cb(native, SelectAlpn,
                               reinterpret_cast<void*>(static_cast<std::uintptr_t>(alpn)));
    if (!AskClientCertificates(native, options, error)) return nullptr;
    // Every context of the listener: OpenSSL takes the session callbacks
    // from the first (default) one, verification from the one SNI chose.
    SSL_CTX_set_session_id_context(native,
                                   reinterpret_cast<const unsigned char*>(session_context.data()),
                                   static_cast<unsigned int>(session_context.size()));
    SSL_CTX_set_timeout(native, static_cast<long>(std::max<std::int64_t>(
                                    1, options.ticket_rotation_ms / 1000)));
    TicketKeys::Install(native, tls->resumption_.ticket_keys);
    SessionCache::Install(native, tls->resumption_.sessions);
    X509* leaf = SSL_CTX_get0_certificate(native);
    tls->leaf_.push_back(leaf);
    tls->certificates_.push_back(Describe(c.cert_file, leaf));
    tls->contexts_.push_back(std::move(ctx));
  }
  SSL_CTX* front = tls->contexts_.front()->native_handle();
  SSL_CTX_set_tlsext_servername_callback(front, &ServerTls::OnServerName);
  SSL_CTX_set_tlsext_servername_arg(front, tls.get());
  return tls;
}

int ServerTls::OnServerName(SSL* ssl, int*, void* arg) {
  auto* self = static_cast<ServerTls*>(arg);
  const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  if (name == nullptr) return SSL_TLSEXT_ERR_OK;
  for (std::size_t i = 0; i < self->leaf_.size(); ++i) {
    if (X509_check_host(self->leaf_[i], name, std::strlen(name), 0, nullptr) == 1) {
      if (i != 0) SSL_set_SSL_CTX(ssl, self->contexts_[i]->native_handle());
      return SSL_TLSEXT_ERR_OK;
    }
  }
  return SSL_TLSEXT_ERR_OK;  // unknown name: the default certificate
}

HandshakeResult Finished(SSL* ssl) {
  return SSL_session_reused(ssl) == 1 ? HandshakeResult::kResumed : HandshakeResult::kOk;
}

int TicketsOwed(SSL* ssl, HandshakeResult result) {
  if (SSL_version(ssl) != TLS1_3_VERSION) return 0;
  if (result == HandshakeResult::kResumed) return 1;
  return static_cast<int>(SSL_CTX_get_num_tickets(SSL_get_SSL_CTX(ssl)));
}

void IssueTickets(SSL* ssl, int& owed) {
  for (; owed > 0; --owed) {
    if (SSL_new_session_ticket(ssl) != 1) {
      owed = 0;
      return;
    }
  }
}

std::unique_ptr<const rules::ClientCertificate> VerifiedClientCertificate(SSL* ssl) {
  X509* cert = SSL_get0_peer_certificate(ssl);
  if (cert == nullptr || SSL_get_verify_result(ssl) != X509_V_OK) return nullptr;
  auto facts = rules::ClientCertificate::FromX509(cert);
  if (!facts) return nullptr;
  return std::make_unique<const rules::ClientCertificate>(std::move(*facts));
}

void KeepSessionOnClose(SSL* ssl) {
  if (SSL_is_init_finished(ssl) == 1) {
    SSL_set_shutdown(ssl, SSL_get_shutdown(ssl) | SSL_SENT_SHUTDOWN);
  }
}

bool VerifyPeerName(SSL* ssl, const std::string& name) {
  if (name.empty()) return false;  // SSL_set1_host would clear the check
  ErrorCode ec;
  asio::ip::make_address(name, ec);
  if (!ec) return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str()) == 1;
  return SSL_set1_host(ssl, name.c_str()) == 1;
}

std::unique_ptr<ssl::context> CreateClientTls(const rules::UpstreamTlsConfig& config,
                                              std::string& error) {
  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  if (config.verify) {
    ctx->set_verify_mode(ssl::verify_peer);
    ErrorCode ec;
    if (config.ca_file.empty()) {
      ctx->set_default_verify_paths(ec);
    } else {
      ctx->load_verify_file(config.ca_file, ec);
    }
    if (ec) {
      error = "cannot load CA certificates: " + ec.message();
      return nullptr;
    }
  } else {
    ctx->set_verify_mode(ssl::verify_none);
  }
  return ctx;
}

}  // namespace tollgate::gateway
