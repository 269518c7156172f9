// Phase identify: a request's canonical form (the path and Host that
// routes, rules, the access log and the upstream see) and who sent it (the
// client's address, user and role, from the peer, trusted proxies' fields
// and the bearer token), then, once admit has decided, the identity fields
// that no one but a trusted proxy may pass on. Protocol adapters hand it
// the request as Beast fields. Heavy (Beast): include only from gateway
// implementation files. Used on the request's worker thread.
#pragma once

#include <string>
#include <string_view>

#include "gateway/io/io_types.h"
#include "rules/identity.h"
#include "rules/request_facts.h"

namespace tollgate::gateway {

// Puts the request's path (query kept) and `host` (the Host field) in
// their canonical forms (rules/normalize.h) in `req`, using `scratch` as
// storage. A problem (answered 400) when either cannot be. Empty Host
// (HTTP/1.0) stays empty; "*" stays.
std::string_view Canonicalize(http::request_header<Fields>& req, std::string_view& host,
                              std::string& scratch);

// Gives the request `fields` its ID (gateway/core/request_id.h) in `id`:
// the single valid X-Request-Id of a peer in trusted_proxies is kept;
// otherwise every X-Request-Id line is replaced by one with a new ID.
void AssignRequestId(const rules::IdentityResolver& resolver, const rules::IpAddress& peer,
                     Fields& fields, std::string& id);

// Beast's fields as rules::HeaderLookup.
class FieldsLookup final : public rules::HeaderLookup {
 public:
  explicit FieldsLookup(const Fields& fields) : fields_(fields) {}
  std::string_view Get(std::string_view name) const override;
  std::string GetJoined(std::string_view name) const override;

 private:
  const Fields& fields_;
};

// Who sent one request, and the facts rules match it on. Refers to `req`,
// `host`, `route` and `client_cert` (the connection's verified client
// certificate; null: none), which must outlive it. Not movable (facts()
// points into it).
class Identification {
 public:
  Identification(const rules::IdentityResolver& resolver, http::request_header<Fields>& req,
                 std::string_view host, std::string_view route, const rules::IpAddress& peer,
                 const rules::ClientCertificate* client_cert = nullptr);
  Identification(const Identification&) = delete;
  Identification& operator=(const Identification&) = delete;

  const rules::RequestFacts& facts() const { return facts_; }
  const rules::Identity& identity() const { return identity_; }
  // Identity fields count only from trusted proxies; nobody else may pass
  // them (in any spelling) or a client address on to the upstream either
  // (ScrubIdentityFields); the client certificate fields are the verified
  // certificate's only. After admit, whose rules may match on them.
  void StripIdentityFields();

 private:
  const rules::IdentityResolver& resolver_;
  http::request_header<Fields>& req_;
  FieldsLookup lookup_;
  rules::RequestFacts facts_;
  rules::Identity identity_;
};

}  // namespace tollgate::gateway
