// What rules and identity need to know about a request, independent of the
// HTTP library: the gateway fills it in from its parsed message.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "rules/ip.h"

namespace tollgate::rules {

struct ClientCertificate;

// Header lookup by case-insensitive name. Implementations are the request's
// own fields; valid for the duration of one evaluation.
class HeaderLookup {
 public:
  // The first value, or empty when absent.
  virtual std::string_view Get(std::string_view name) const = 0;
  // Every value of a repeated header joined with ", " (X-Forwarded-For).
  virtual std::string GetJoined(std::string_view name) const = 0;

 protected:
  ~HeaderLookup() = default;
};

// One entry of an Envoy RLS descriptor.
struct DescriptorEntry {
  std::string_view key;
  std::string_view value;
};

// An RLS descriptor's own limit (RateLimitDescriptor.limit, as Envoy's
// route configuration states it): `limit` requests per `window_ms`, the
// window written as `window` ("1m"; static storage).
struct DescriptorLimit {
  std::int64_t limit = 0;
  std::int64_t window_ms = 0;
  std::string_view window;
};

struct RequestFacts {
  std::string_view method;
  std::string_view path;  // without the query
  std::string_view host;  // Host header as sent
  std::string_view route;
  IpAddress peer;  // the socket's remote address
  const HeaderLookup* headers = nullptr;
  // The connection's client certificate, verified by its TLS handshake;
  // null: none (or none that verified).
  const ClientCertificate* client_cert = nullptr;
  // An Envoy RLS descriptor rather than an HTTP request: only the rules
  // with `domain`/`descriptor` apply (method, path, host and route empty).
  bool descriptor_call = false;
  std::string_view domain;
  std::span<const DescriptorEntry> descriptor;
  // > 0: what each rule's decision costs instead of the rule's own cost
  // (an RLS hits_addend).
  std::int64_t cost = 0;
  // Set: every rate rule that matches decides by this limit in place of
  // its own (gateway/core/descriptor_limit.h). Null: the rules' limits.
  const DescriptorLimit* descriptor_limit = nullptr;
  // The JSON request body's values by dotted path, for json:PATH key
  // parts; null: the body is not read (yet), and a key with such parts is
  // built up to them (RuleHit::body_key).
  const HeaderLookup* body_fields = nullptr;
};

}  // namespace tollgate::rules
