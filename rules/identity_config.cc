#include "rules/identity_config.h"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "rules/client_certificate.h"

namespace tollgate::rules {
namespace {

std::optional<std::string> ReadFileText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

ClientCertIdentityConfig ReadClientCertIdentity(TableReader r) {
  ClientCertIdentityConfig c;
  if (auto u = r.OneOf("user")) {
    c.user = *u == "subject_cn" ? CertificateUser::kSubjectCn
             : *u == "san_uri"  ? CertificateUser::kSanUri
             : *u == "san_dns"  ? CertificateUser::kSanDns
                                : CertificateUser::kSha256;
  }
  if (auto role = r.String("role")) {
    constexpr std::string_view kPrefix = "subject_";
    const std::string attribute = role->rfind(kPrefix, 0) == 0 ? role->substr(kPrefix.size()) : "";
    if (!IsKnownSubjectAttribute(attribute)) {
      r.errors().Add(*r.Find("role"),
                     fmt::format("\"role\" must be a subject attribute: \"subject_ou\", "
                                 "\"subject_o\", \"subject_cn\", \"subject_title\", ...; got "
                                 "\"{}\"",
                                 *role));
    } else {
      c.role_attribute = attribute;
    }
  }
  if (auto h = r.HeaderName("subject_header")) c.subject_header = *h;
  if (auto h = r.HeaderName("sha256_header")) c.sha256_header = *h;
  r.Finish();
  return c;
}

}  // namespace

std::vector<Cidr> ReadCidrs(const toml::value& v, std::string_view name, ErrorList& errors) {
  std::vector<Cidr> out;
  auto list = ReadStringOrStrings(v, name, errors);
  if (!list) return out;
  const toml::value* items = v.is_array() ? nullptr : &v;
  for (std::size_t i = 0; i < list->size(); ++i) {
    std::string problem;
    if (auto c = Cidr::Parse((*list)[i], problem)) {
      out.push_back(*c);
    } else {
      errors.Add(items != nullptr ? *items : v.as_array()[i],
                 fmt::format("\"{}\" must list CIDRs such as \"10.0.0.0/8\" or \"::1/128\": {}",
                             name, problem));
    }
  }
  return out;
}

std::optional<std::string> ReadSecret(TableReader& r, std::string_view env_key,
                                      std::string_view file_key) {
  std::optional<std::string> secret;
  if (auto env = r.String(env_key)) {
    const char* value = std::getenv(env->c_str());
    if (value == nullptr || *value == '\0') {
      r.errors().Add(*r.Find(env_key), fmt::format("environment variable {} is not set", *env));
    } else {
      secret = value;
    }
  }
  if (auto file = r.String(file_key)) {
    auto text = ReadFileText(*file);
    if (!text) {
      r.errors().Add(*r.Find(file_key), fmt::format("cannot read \"{}\"", *file));
    } else {
      while (!text->empty() && (text->back() == '\n' || text->back() == '\r')) text->pop_back();
      secret = std::move(*text);
    }
  }
  return secret;
}

void ReadIdentity(TableReader r, IdentityConfig& out) {
  if (const toml::value* v = r.Find("trusted_proxies")) {
    out.trusted_proxies = ReadCidrs(*v, "trusted_proxies", r.errors());
  }
  if (auto s = r.HeaderName("user_header")) out.user_header = *s;
  if (auto s = r.HeaderName("role_header")) out.role_header = *s;
  if (auto n = r.Integer("ipv6_prefix")) out.ipv6_prefix = static_cast<int>(*n);
  if (const toml::value* jwt = r.Find("jwt")) {
    if (!jwt->is_table()) {
      r.errors().Add(*jwt, fmt::format("\"jwt\" must be a table; got {}", DescribeType(*jwt)));
    } else {
      JwtConfig j;
      TableReader jr(*jwt, r.TableOf("jwt"), r.errors());
      if (auto a = jr.OneOf("algorithm")) {
        j.algorithm = *a == "HS256"   ? JwtAlgorithm::kHs256
                      : *a == "RS256" ? JwtAlgorithm::kRs256
                                      : JwtAlgorithm::kEs256;
      }
      if (auto secret = ReadSecret(jr, "secret_env", "secret_file")) j.secret = *secret;
      if (auto file = jr.String("public_key_file")) {
        auto text = ReadFileText(*file);
        if (!text) {
          r.errors().Add(*jr.Find("public_key_file"), fmt::format("cannot read \"{}\"", *file));
        } else {
          j.public_key_pem = *text;
        }
      }
      if (auto s = jr.String("user_claim")) j.user_claim = *s;
      if (auto s = jr.String("role_claim")) j.role_claim = *s;
      if (auto d = jr.DurationMs("leeway")) j.leeway_ms = *d;
      if (auto s = jr.OneOf("on_invalid")) {
        j.on_invalid = *s == "reject" ? OnInvalidToken::kReject : OnInvalidToken::kAnonymous;
      }
      const bool hmac = j.algorithm == JwtAlgorithm::kHs256;
      if (hmac && j.secret.empty() && !jr.Has("secret_env") && !jr.Has("secret_file")) {
        r.errors().Add(*jwt, "HS256 needs \"secret_env\" or \"secret_file\"");
      }
      if (!hmac && !jr.Has("public_key_file")) {
        r.errors().Add(*jwt, "RS256 and ES256 need \"public_key_file\"");
      }
      jr.Finish();
      out.jwt = j;
    }
  }
  if (const toml::value* cert = r.Find("client_cert")) {
    if (!cert->is_table()) {
      r.errors().Add(*cert,
                     fmt::format("\"client_cert\" must be a table; got {}", DescribeType(*cert)));
    } else {
      out.client_cert =
          ReadClientCertIdentity(TableReader(*cert, r.TableOf("client_cert"), r.errors()));
    }
  }
  r.Finish();
}

}  // namespace tollgate::rules
