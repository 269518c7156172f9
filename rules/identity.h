// Who a request comes from: client IP (the socket peer, or from
// X-Forwarded-For only when the peer is a trusted proxy), user and role
// (first from the connection's verified client certificate, with
// [identity.client_cert]; else from a verified JWT; else from headers only
// when the peer is a trusted proxy, in their configured spelling only).
// Immutable after construction; thread-safe.
#pragma once

#include <memory>
#include <string>

#include "rules/client_certificate.h"
#include "rules/jwt.h"
#include "rules/request_facts.h"
#include "rules/rule.h"
#include "base/clock.h"

namespace tollgate::rules {

enum class TokenState { kNone, kValid, kInvalid };

struct Identity {
  IpAddress client_ip;
  // Not empty when a trusted proxy's X-Forwarded-For names the client with
  // something that is no address ("unknown", "_hidden", garbage): that text.
  // The client is then in no CIDR and its `ip` key is this text's, apart
  // from every address's (never its proxy's); client_ip is ::.
  std::string unidentified_client;
  // The `ip` key of an IPv6 client is its network of this many bits
  // ([identity] ipv6_prefix); IPv4 clients (IPv4-mapped ones too) are keyed
  // by their address.
  int ipv6_prefix = 128;
  std::string user;  // empty: anonymous
  std::string role;
  TokenState token = TokenState::kNone;
  bool peer_trusted = false;  // identity headers from the peer may be honoured
  // The connection's verified client certificate (owned by the connection,
  // which outlives its requests); null: none.
  const ClientCertificate* certificate = nullptr;
  bool from_certificate = false;  // user and role come from `certificate`
  bool anonymous() const { return user.empty(); }
};

class IdentityResolver {
 public:
  // nullptr with `error` set when the JWT key cannot be used.
  static std::unique_ptr<IdentityResolver> Create(const IdentityConfig& config,
                                                  const store::Clock& clock, std::string& error);
  Identity Resolve(const RequestFacts& request) const;
  const IdentityConfig& config() const { return config_; }
  // Sets client_ip (the peer, or from X-Forwarded-For behind trusted
  // proxies) or unidentified_client.
  void FindClient(const IpAddress& peer, const HeaderLookup& headers, Identity& out) const;
  // Whether `address` is in trusted_proxies.
  bool Trusted(const IpAddress& address) const;

 private:
  IdentityResolver(const IdentityConfig& config, const store::Clock& clock);

  IdentityConfig config_;
  const store::Clock& clock_;
  std::unique_ptr<JwtVerifier> jwt_;
};

}  // namespace tollgate::rules
