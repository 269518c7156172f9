#include "rules/identity.h"

#include <algorithm>

namespace tollgate::rules {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// "Bearer <token>", the scheme in any case (RFC 9110 §11.1).
bool IsBearer(std::string_view auth) {
  constexpr std::string_view kScheme = "bearer ";
  return auth.size() > kScheme.size() &&
         std::equal(kScheme.begin(), kScheme.end(), auth.begin(), [](char want, char c) {
           return want == (c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c);
         });
}

}  // namespace

std::unique_ptr<IdentityResolver> IdentityResolver::Create(const IdentityConfig& config,
                                                           const store::Clock& clock,
                                                           std::string& error) {
  auto resolver = std::unique_ptr<IdentityResolver>(new IdentityResolver(config, clock));
  if (config.jwt) {
    resolver->jwt_ = JwtVerifier::Create(*config.jwt, error);
    if (!resolver->jwt_) return nullptr;
  }
  return resolver;
}

IdentityResolver::IdentityResolver(const IdentityConfig& config, const store::Clock& clock)
    : config_(config), clock_(clock) {}

bool IdentityResolver::Trusted(const IpAddress& address) const {
  return std::any_of(config_.trusted_proxies.begin(), config_.trusted_proxies.end(),
                     [&](const Cidr& c) { return c.Contains(address); });
}

IpAddress IdentityResolver::ClientIp(const IpAddress& peer, const HeaderLookup& headers) const {
  if (!Trusted(peer)) return peer;
  // Right to left: each hop was added by the proxy to its right; the first
  // address that is not one of ours is the client. A hop that does not parse
  // ends the walk at the last proxy we trust.
  const std::string chain = headers.GetJoined("X-Forwarded-For");
  IpAddress client = peer;
  std::size_t end = chain.size();
  while (end > 0) {
    const std::size_t comma = chain.rfind(',', end - 1);
    const std::size_t start = comma == std::string::npos ? 0 : comma + 1;
    const auto hop = IpAddress::Parse(Trim(std::string_view(chain).substr(start, end - start)));
    if (!hop) break;
    client = *hop;
    if (!Trusted(*hop)) break;
    if (comma == std::string::npos) break;
    end = comma;
  }
  return client;
}

Identity IdentityResolver::Resolve(const RequestFacts& request) const {
  Identity id;
  id.peer_trusted = Trusted(request.peer);
  id.ipv6_prefix = config_.ipv6_prefix;
  id.client_ip = ClientIp(request.peer, *request.headers);
  if (jwt_) {
    const std::string_view auth = request.headers->Get("Authorization");
    if (IsBearer(auth)) {
      const JwtClaims claims = jwt_->Verify(Trim(auth.substr(7)), clock_.UnixMs());
      if (claims.valid) {
        id.token = TokenState::kValid;
        id.user = claims.user;
        id.role = claims.role;
        return id;
      }
      id.token = TokenState::kInvalid;
      return id;
    }
  }
  if (id.peer_trusted) {
    if (!config_.user_header.empty())
      id.user = std::string(request.headers->Get(config_.user_header));
    if (!config_.role_header.empty())
      id.role = std::string(request.headers->Get(config_.role_header));
  }
  return id;
}

}  // namespace tollgate::rules
