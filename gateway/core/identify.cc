#include "gateway/core/identify.h"

#include <iterator>

#include "gateway/core/http_util.h"
#include "gateway/core/request_id.h"
#include "rules/normalize.h"

namespace tollgate::gateway {

std::string_view Canonicalize(http::request_header<Fields>& req, std::string_view& host,
                              std::string& scratch) {
  const std::string_view target = req.target();
  if (target.front() == '/') {
    const std::size_t query = target.find('?');
    const rules::PathStatus path =
        rules::NormalizePath(target.substr(0, query), scratch);
    switch (path) {
      case rules::PathStatus::kUnchanged:
        break;
      case rules::PathStatus::kNormalized:
        if (query != std::string_view::npos) scratch.append(target.substr(query));
        req.target(scratch);
        break;
      case rules::PathStatus::kBadEncoding:
        return "the path has a malformed percent-encoding";
      case rules::PathStatus::kNulByte:
        return "the path holds a NUL byte";
      case rules::PathStatus::kAboveRoot:
        return "the path climbs above the root";
      case rules::PathStatus::kNotAbsolute:
        return "the path must start with /";
    }
  }
  if (host.empty()) return {};  // HTTP/1.0 without Host
  switch (rules::NormalizeHost(host, scratch)) {
    case rules::HostStatus::kUnchanged:
      break;
    case rules::HostStatus::kNormalized:
      req.set(http::field::host, scratch);
      host = req[http::field::host];
      break;
    case rules::HostStatus::kInvalid:
      return "the Host field is not a valid host";
  }
  return {};
}

void AssignRequestId(const rules::IdentityResolver& resolver, const rules::IpAddress& peer,
                     Fields& fields, std::string& id) {
  id.clear();
  const auto [first, last] = fields.equal_range(kRequestIdField);
  if (first == last) {
    AppendNewRequestId(id);
    fields.insert(kRequestIdField, id);
    return;
  }
  if (std::next(first) == last && ValidRequestId(first->value()) && resolver.Trusted(peer)) {
    id = first->value();
    return;
  }
  AppendNewRequestId(id);
  fields.set(kRequestIdField, id);
}

std::string_view FieldsLookup::Get(std::string_view name) const {
  auto it = fields_.find(name);
  return it == fields_.end() ? std::string_view() : std::string_view(it->value());
}

std::string FieldsLookup::GetJoined(std::string_view name) const {
  std::string out;
  auto [first, last] = fields_.equal_range(name);
  for (auto it = first; it != last; ++it) {
    if (!out.empty()) out += ", ";
    out.append(it->value().data(), it->value().size());
  }
  return out;
}

Identification::Identification(const rules::IdentityResolver& resolver,
                               http::request_header<Fields>& req, std::string_view host,
                               std::string_view route, const rules::IpAddress& peer,
                               const rules::ClientCertificate* client_cert)
    : resolver_(resolver), req_(req), lookup_(req) {
  const std::string_view target = req.target();
  facts_.method = req.method_string();
  facts_.path = target.substr(0, target.find('?'));
  facts_.host = host;
  facts_.route = route;
  facts_.peer = peer;
  facts_.headers = &lookup_;
  facts_.client_cert = client_cert;
  identity_ = resolver.Resolve(facts_);
}

void Identification::StripIdentityFields() {
  ScrubIdentityFields(req_, resolver_.config(), identity_);
}

}  // namespace tollgate::gateway
