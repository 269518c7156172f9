#include "rules/client_certificate.h"

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace tollgate::rules {
namespace {

// Short names (lower case) that OBJ_sn2nid knows under their usual
// spelling, checked by the configuration loader.
constexpr std::array<std::string_view, 12> kSubjectAttributes = {
    "cn", "ou", "o", "l", "st", "c", "dc", "uid", "serialnumber", "title", "emailaddress", "street"};

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string Utf8(const ASN1_STRING* value) {
  unsigned char* utf8 = nullptr;
  const int n = ASN1_STRING_to_UTF8(&utf8, value);
  if (n < 0) return {};
  std::string out(reinterpret_cast<const char*>(utf8), static_cast<std::size_t>(n));
  OPENSSL_free(utf8);
  return out;
}

std::string Rfc2253(X509_NAME* name) {
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return {};
  X509_NAME_print_ex(bio, name, 0, XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<std::size_t>(std::max(0L, n)));
  BIO_free(bio);
  return out;
}

}  // namespace

std::optional<ClientCertificate> ClientCertificate::FromX509(X509* cert) {
  if (cert == nullptr) return std::nullopt;
  ClientCertificate out;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_size = 0;
  if (X509_digest(cert, EVP_sha256(), digest, &digest_size) != 1) return std::nullopt;
  static constexpr char kHex[] = "0123456789abcdef";
  out.sha256.reserve(2 * digest_size);
  for (unsigned int i = 0; i < digest_size; ++i) {
    out.sha256 += kHex[digest[i] >> 4];
    out.sha256 += kHex[digest[i] & 15];
  }
  X509_NAME* subject = X509_get_subject_name(cert);
  out.subject = Rfc2253(subject);
  for (int i = 0; i < X509_NAME_entry_count(subject); ++i) {
    const X509_NAME_ENTRY* entry = X509_NAME_get_entry(subject, i);
    const int nid = OBJ_obj2nid(X509_NAME_ENTRY_get_object(entry));
    const char* short_name = nid == NID_undef ? nullptr : OBJ_nid2sn(nid);
    if (short_name == nullptr) continue;
    out.attributes.emplace_back(Lower(short_name), Utf8(X509_NAME_ENTRY_get_data(entry)));
  }
  auto* names = static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; names != nullptr && i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
    if (name->type == GEN_URI && out.san_uri.empty()) {
      out.san_uri = Utf8(name->d.uniformResourceIdentifier);
    } else if (name->type == GEN_DNS && out.san_dns.empty()) {
      out.san_dns = Utf8(name->d.dNSName);
    }
  }
  GENERAL_NAMES_free(names);
  return out;
}

std::string_view ClientCertificate::Attribute(std::string_view name) const {
  for (const auto& [key, value] : attributes) {
    if (key == name) return value;
  }
  return {};
}

std::string_view ClientCertificate::User(CertificateUser source) const {
  switch (source) {
    case CertificateUser::kSubjectCn:
      return Attribute("cn");
    case CertificateUser::kSanUri:
      return san_uri;
    case CertificateUser::kSanDns:
      return san_dns;
    case CertificateUser::kSha256:
      return sha256;
  }
  return {};
}

bool IsKnownSubjectAttribute(std::string_view name) {
  return std::find(kSubjectAttributes.begin(), kSubjectAttributes.end(), name) !=
         kSubjectAttributes.end();
}

}  // namespace tollgate::rules
