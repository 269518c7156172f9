// A test PKI made with the openssl CLI in a TempDir: a client CA with an
// index (so it can revoke and publish CRLs), client certificates signed by
// it, and a second, unrelated CA. Used by the client certificate and
// resumption tests.
#pragma once

#include <string>

#include "../test_support.h"
#include "tests/support/tls_config.h"

namespace tollgate::testing {

struct ClientCert {
  std::string cert, key;  // PEM files
};

class TestPki {
 public:
  explicit TestPki(const TempDir& dir);
  // Signed by the client CA; `subject` as "/O=Test/OU=admins/CN=alice",
  // `san` an optional subjectAltName ("URI:spiffe://test/alice").
  // `expired`: valid in 2020 only.
  ClientCert Issue(const std::string& name, const std::string& subject, const std::string& san = "",
                   bool expired = false);
  // Signed by another CA the gateway does not know.
  ClientCert IssueByStranger(const std::string& name, const std::string& subject);
  // Marks `cert` revoked in the CA's index; WriteCrl() publishes it.
  void Revoke(const ClientCert& cert);
  // Writes the CA's current CRL to crl_file().
  void WriteCrl();

  const std::string& ca_file() const { return ca_; }
  const std::string& crl_file() const { return crl_; }
  // The gateway's own certificate (self-signed, for 127.0.0.1/localhost).
  const std::string& server_cert() const { return server_cert_; }
  const std::string& server_key() const { return server_key_; }

 private:
  std::string OpenSslCa(const std::string& args);
  std::string dir_, ca_, ca_key_, crl_, config_, stranger_, stranger_key_;
  std::string server_cert_, server_key_;
};

// A "tls" table for a listener: the server certificate and `extra`
// (client_ca = ..., client_cert = ..., ...); for TlsConfig.
std::string TlsTable(const TestPki& pki, const std::string& extra);

}  // namespace tollgate::testing
