#include "rules/listener_config.h"

#include <fmt/format.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "rules/identity_config.h"

namespace tollgate::rules {
namespace {

// The number of PEM blocks of `label` ("CERTIFICATE", "X509 CRL") that
// parse in `file`.
int CountPem(const std::string& file, std::string_view label) {
  BIO* bio = BIO_new_file(file.c_str(), "r");
  if (bio == nullptr) return 0;
  int count = 0;
  for (;;) {
    if (label == "CERTIFICATE") {
      X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
      if (cert == nullptr) break;
      X509_free(cert);
    } else {
      X509_CRL* crl = PEM_read_bio_X509_CRL(bio, nullptr, nullptr, nullptr);
      if (crl == nullptr) break;
      X509_CRL_free(crl);
    }
    ++count;
  }
  ERR_clear_error();
  BIO_free(bio);
  return count;
}

// A PEM file that must hold at least one `label` block.
std::optional<std::string> ReadPemFile(TableReader& r, std::string_view key, std::string_view label,
                                       std::string_view what) {
  auto file = r.String(key);
  if (!file) return std::nullopt;
  const toml::value& at = *r.Find(key);
  std::ifstream in(*file);
  if (!in) {
    r.errors().Add(at, fmt::format("cannot read {} \"{}\"", what, *file));
    return std::nullopt;
  }
  if (CountPem(*file, label) == 0) {
    r.errors().Add(at, fmt::format("{} \"{}\" holds no PEM {}", what, *file, label));
    return std::nullopt;
  }
  return file;
}

// Session ticket key files in nginx's format: 48 bytes (AES-128) or 80
// bytes (AES-256) of random data each.
void ReadTicketKeyFiles(TableReader& r, std::vector<std::string>& out) {
  const toml::value* v = r.Find("ticket_key_file");
  if (v == nullptr) return;
  std::vector<const toml::value*> items;
  if (v->is_array()) {
    for (const toml::value& item : v->as_array()) items.push_back(&item);
    if (items.empty()) r.errors().Add(*v, "\"ticket_key_file\" lists no file");
  } else {
    items.push_back(v);
  }
  for (const toml::value* item : items) {
    auto file = ReadString(*item, "ticket_key_file", r.errors());
    if (!file) continue;
    std::error_code ec;
    const auto size = std::filesystem::file_size(*file, ec);
    if (ec) {
      r.errors().Add(*item, fmt::format("cannot read session ticket key \"{}\"", *file));
    } else if (size != 48 && size != 80) {
      r.errors().Add(*item, fmt::format("session ticket key \"{}\" has {} bytes; it must have 48 "
                                        "or 80 (openssl rand 80 > file)",
                                        *file, size));
    } else {
      out.push_back(*file);
    }
  }
}

// The listener-wide keys of a "tls" table.
void ReadListenerTls(TableReader& r, ListenerTlsConfig& out) {
  if (auto mode = r.OneOf("client_cert")) {
    out.client_cert = *mode == "require"    ? ClientCertMode::kRequire
                      : *mode == "optional" ? ClientCertMode::kOptional
                                            : ClientCertMode::kNone;
  }
  if (auto ca = ReadPemFile(r, "client_ca", "CERTIFICATE", "client CA bundle")) out.client_ca = *ca;
  if (auto crl = ReadPemFile(r, "client_crl", "X509 CRL", "CRL file")) out.client_crl = *crl;
  if (auto d = r.DurationMs("ticket_rotation")) out.ticket_rotation_ms = *d;
  ReadTicketKeyFiles(r, out.ticket_key_files);
  if (out.client_cert != ClientCertMode::kNone && !r.Has("client_ca")) {
    r.errors().Add(*r.Find("client_cert"),
                   "client_cert = \"optional\" or \"require\" needs \"client_ca\", the CAs "
                   "that client certificates must chain to");
  }
  if (r.Has("client_ca") && out.client_cert == ClientCertMode::kNone) {
    r.errors().Add(*r.Find("client_ca"),
                   "\"client_ca\" is set but no client certificate is asked for: add "
                   "client_cert = \"require\" or \"optional\"");
  }
  if (r.Has("client_crl") && !r.Has("client_ca")) {
    r.errors().Add(*r.Find("client_crl"), "\"client_crl\" needs \"client_ca\"");
  }
}

// One certificate of a listener's "tls"; `options`, when not null, also
// takes the listener-wide keys (the table form, or the array's first table).
std::optional<CertificateConfig> ReadCertificate(const toml::value& v, const TableSpec& spec,
                                                 ErrorList& errors, ListenerTlsConfig* options) {
  if (!v.is_table()) {
    errors.Add(v, fmt::format("\"tls\" must be a table {{ cert = \"...\", key = \"...\" }}; got {}",
                              DescribeType(v)));
    return std::nullopt;
  }
  TableReader r(v, spec, errors);
  const toml::value* cert = r.Require("cert");
  const toml::value* key = r.Require("key");
  if (options != nullptr) ReadListenerTls(r, *options);
  r.Finish();
  if (cert == nullptr || key == nullptr) return std::nullopt;
  auto cert_file = ReadString(*cert, "cert", errors);
  auto key_file = ReadString(*key, "key", errors);
  if (!cert_file || !key_file) return std::nullopt;
  CheckReadable(*cert, *cert_file, "certificate", errors);
  CheckReadable(*key, *key_file, "private key", errors);
  return CertificateConfig{*cert_file, *key_file};
}

}  // namespace

void ReadListener(TableReader r, std::vector<ListenerConfig>& out) {
  ListenerConfig l;
  if (r.Require("address") != nullptr) {
    if (auto a = r.Address("address")) l.address = *a;
  }
  if (const toml::value* tls = r.Find("tls")) {
    // One certificate as a table, or several (chosen by SNI) as an array.
    if (tls->is_array()) {
      // The listener-wide keys go in the first table.
      for (const toml::value& item : tls->as_array()) {
        ListenerTlsConfig* options = &item == &tls->as_array().front() ? &l.tls_options : nullptr;
        if (auto c = ReadCertificate(item, r.TableOf("tls"), r.errors(), options))
          l.certificates.push_back(*c);
      }
      if (tls->as_array().empty()) r.errors().Add(*tls, "\"tls\" lists no certificate");
    } else if (auto c = ReadCertificate(*tls, r.TableOf("tls"), r.errors(), &l.tls_options)) {
      l.certificates.push_back(*c);
    }
  }
  if (auto v = r.Bool("http2")) l.http2 = *v;
  r.Finish();
  out.push_back(std::move(l));
}

void ReadDecision(TableReader r, std::optional<DecisionConfig>& out) {
  DecisionConfig d;
  if (r.Require("address") != nullptr) {
    if (auto a = r.Address("address")) d.listener.address = *a;
  }
  if (const toml::value* tls = r.Find("tls")) {
    if (auto c = ReadCertificate(*tls, r.TableOf("tls"), r.errors(), &d.listener.tls_options)) {
      d.listener.certificates.push_back(*c);
    }
  }
  if (const toml::value* allow = r.Find("allow")) {
    d.allow = ReadCidrs(*allow, "allow", r.errors());
    if (allow->is_array() && allow->as_array().empty()) {
      r.errors().Add(*allow, "\"allow\" lists no network: leave it out to accept any address");
    }
  }
  if (auto s = r.Integer("deny_status")) d.deny_status = static_cast<unsigned>(*s);
  r.Finish();
  out = std::move(d);
}

void CheckDistinctAddresses(const toml::value& root, ErrorList& errors) {
  std::vector<const toml::value*> addresses;
  const auto add = [&addresses](const toml::value& table) {
    if (table.is_table() && table.contains("address")) addresses.push_back(&table.at("address"));
  };
  if (root.contains("listeners") && root.at("listeners").is_array()) {
    for (const toml::value& l : root.at("listeners").as_array()) add(l);
  }
  for (const char* section : {"decision", "admin"}) {
    if (root.contains(section)) add(root.at(section));
  }
  std::map<std::string, const toml::value*> seen;
  for (const toml::value* a : addresses) {
    if (!a->is_string()) continue;
    const std::optional<HostPort> address = ParseHostPort(a->as_string().str);
    if (!address || address->port == 0) continue;
    const auto [first, inserted] = seen.emplace(address->ToString(), a);
    if (!inserted) {
      errors.Add(*a, fmt::format("address {} is already used at line {}: every listener, the "
                                 "decision service and the admin API need addresses of their own",
                                 address->ToString(), first->second->location().line()));
    }
  }
}

}  // namespace tollgate::rules
