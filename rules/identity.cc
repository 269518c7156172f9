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

void IdentityResolver::FindClient(const IpAddress& peer, const HeaderLookup& headers,
                                  Identity& out) const {
  out.client_ip = peer;
  if (!Trusted(peer)) return;
  // Right to left: each hop was added by the proxy to its right; the first
  // address that is not one of ours is the client. Empty elements do not
  // count (RFC 9110 §5.6.1); a port after an address is ignored. An entry
  // that is no address was written by a proxy we trust (a client's own
  // entries are left of the one its proxy added) that could not name the
  // client: the client is that text, never the proxy before it (whose own
  // requests would then share its key).
  const std::string chain = headers.GetJoined("X-Forwarded-For");
  std::size_t end = chain.size();
  while (end > 0) {
    const std::size_t comma = chain.rfind(',', end - 1);
    const std::size_t start = comma == std::string::npos ? 0 : comma + 1;
    const std::string_view entry = Trim(std::string_view(chain).substr(start, end - start));
    end = comma == std::string::npos ? 0 : comma;
    if (entry.empty()) continue;
    const auto hop = IpAddress::ParseWithPort(entry);
    if (!hop) {
      out.client_ip = IpAddress{};
      out.unidentified_client = entry;
      return;
    }
    out.client_ip = *hop;
    if (!Trusted(*hop)) return;
  }
}

Identity IdentityResolver::Resolve(const RequestFacts& request) const {
  Identity id;
  id.peer_trusted = Trusted(request.peer);
  id.ipv6_prefix = config_.ipv6_prefix;
  FindClient(request.peer, *request.headers, id);
  id.certificate = request.client_cert;
  // A certificate is verified by the handshake itself: it wins over a
  // token or a proxy's word, whenever it names the user.
  if (config_.client_cert && request.client_cert != nullptr) {
    const std::string_view user = request.client_cert->User(config_.client_cert->user);
    if (!user.empty()) {
      id.user = user;
      if (!config_.client_cert->role_attribute.empty()) {
        id.role = request.client_cert->Attribute(config_.client_cert->role_attribute);
      }
      id.from_certificate = true;
      return id;
    }
  }
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
