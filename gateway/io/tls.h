// TLS contexts: server side (TLS 1.2+, ALPN h2 and http/1.1, several certificates
// chosen by SNI) and client side towards upstreams (verification, SNI).
// Built while loading config; errors are returned as text. The contexts are
// immutable after creation and shared by all threads (OpenSSL allows that).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gateway/io/net.h"
#include "rules/config.h"

namespace tollgate::gateway {

// The application protocols a listener offers in ALPN.
enum class AlpnOffer { kHttp11, kH2AndHttp11 };

class ServerTls {
 public:
  // nullptr and `error` set when a certificate or key cannot be used.
  static std::unique_ptr<ServerTls> Create(const std::vector<rules::CertificateConfig>& certs,
                                           AlpnOffer alpn, std::string& error);
  ssl::context& context() { return *contexts_.front(); }

 private:
  static int OnServerName(SSL* ssl, int* alert, void* arg);
  std::vector<std::unique_ptr<ssl::context>> contexts_;  // first: default
  std::vector<X509*> leaf_;  // not owned; the leaf certificate of each context
};

std::unique_ptr<ssl::context> CreateClientTls(const rules::UpstreamTlsConfig& config,
                                              std::string& error);

}  // namespace tollgate::gateway
