// What a connection's verified client certificate says, taken once after
// the TLS handshake (gateway/io/tls.h) and read by identity for each of the
// connection's requests. Immutable after FromX509; thread-safe to read.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rules/rule.h"

typedef struct x509_st X509;

namespace tollgate::rules {

struct ClientCertificate {
  // The subject as RFC 2253 text ("CN=alice,OU=admins,O=Example"), as
  // nginx's $ssl_client_s_dn.
  std::string subject;
  std::string sha256;  // the DER encoding's SHA-256, 64 lower-case hex digits
  // Subject attributes in order: short name in lower case ("cn", "ou"),
  // value as UTF-8.
  std::vector<std::pair<std::string, std::string>> attributes;
  std::string san_uri;  // the first URI subjectAltName; empty: none
  std::string san_dns;  // the first DNS subjectAltName; empty: none

  // The facts of `cert` (not owned); nullopt when it cannot be read.
  static std::optional<ClientCertificate> FromX509(X509* cert);
  // The first value of subject attribute `name` (lower case); empty: none.
  std::string_view Attribute(std::string_view name) const;
  // The user `source` names; empty when the certificate has no such field.
  std::string_view User(CertificateUser source) const;
};

// The subject attributes a role may come from ("ou" for "subject_ou").
bool IsKnownSubjectAttribute(std::string_view name);

}  // namespace tollgate::rules
