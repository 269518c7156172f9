#include "gateway/io/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cstdint>
#include <cstring>

namespace tollgate::gateway {
namespace {

constexpr const char* kCiphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

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

}  // namespace

std::unique_ptr<ServerTls> ServerTls::Create(const std::vector<rules::CertificateConfig>& certs,
                                             AlpnOffer alpn, std::string& error) {
  auto tls = std::unique_ptr<ServerTls>(new ServerTls());
  for (const rules::CertificateConfig& c : certs) {
    auto ctx = std::make_unique<ssl::context>(ssl::context::tls_server);
    SSL_CTX* native = ctx->native_handle();
    SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
    SSL_CTX_set_cipher_list(native, kCiphers);
    SSL_CTX_set_options(
        native, SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_RENEGOTIATION);
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
    tls->leaf_.push_back(SSL_CTX_get0_certificate(native));
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
