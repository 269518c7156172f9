#include "gateway/http_util.h"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <string>
#include <vector>

namespace tollgate::gateway {

void RemoveHopByHop(Fields& fields) {
  // Names listed in Connection are hop-by-hop too; collect them first.
  std::vector<std::string> named;
  for (auto it = fields.find(http::field::connection);
       it != fields.end() && it->name() == http::field::connection; ++it) {
    for (auto token : http::token_list(it->value())) named.emplace_back(token);
  }
  for (const std::string& name : named) {
    // "Connection: Content-Length" must not strip the message's framing.
    if (beast::iequals(name, "content-length") || beast::iequals(name, "host")) continue;
    fields.erase(name);
  }
  for (http::field f :
       {http::field::connection, http::field::keep_alive, http::field::proxy_connection,
        http::field::te, http::field::trailer, http::field::transfer_encoding, http::field::upgrade,
        http::field::proxy_authenticate, http::field::proxy_authorization}) {
    fields.erase(f);
  }
}

void AddForwardedHeaders(Fields& fields, std::string_view client_ip, Scheme scheme) {
  std::string chain;
  auto [first, last] = fields.equal_range("X-Forwarded-For");
  for (auto it = first; it != last; ++it) {
    if (!chain.empty()) chain += ", ";
    chain.append(it->value().data(), it->value().size());
  }
  if (!chain.empty()) chain += ", ";
  chain.append(client_ip);
  fields.set("X-Forwarded-For", chain);
  fields.set("X-Forwarded-Proto", scheme == Scheme::kHttps ? "https" : "http");
  auto host = fields[http::field::host];
  if (host.empty()) {
    fields.erase("X-Forwarded-Host");
  } else {
    fields.set("X-Forwarded-Host", host);
  }
}

namespace {

void AppendFields(const Fields& fields, std::string& out, std::string_view extra = {}) {
  for (const auto& f : fields) {
    out.append(f.name_string().data(), f.name_string().size());
    out.append(": ");
    out.append(f.value().data(), f.value().size());
    out.append("\r\n");
  }
  out.append(extra);
  out.append("\r\n");
}

void AppendVersion(unsigned version, std::string& out) {
  out.append("HTTP/");
  out.push_back(static_cast<char>('0' + version / 10));
  out.push_back('.');
  out.push_back(static_cast<char>('0' + version % 10));
}

}  // namespace

void AppendWireHeader(const http::request_header<Fields>& header, std::string& out) {
  out.append(header.method_string().data(), header.method_string().size());
  out.push_back(' ');
  out.append(header.target().data(), header.target().size());
  out.push_back(' ');
  AppendVersion(header.version(), out);
  out.append("\r\n");
  AppendFields(header, out);
}

void AppendWireHeader(const http::response_header<Fields>& header, std::string& out,
                      std::string_view extra) {
  AppendVersion(header.version(), out);
  out.push_back(' ');
  out.append(std::to_string(header.result_int()));
  out.push_back(' ');
  out.append(header.reason().data(), header.reason().size());
  out.append("\r\n");
  AppendFields(header, out, extra);
}

bool IsIdempotent(http::verb method) {
  switch (method) {
    case http::verb::get:
    case http::verb::head:
    case http::verb::put:
    case http::verb::delete_:
    case http::verb::options:
    case http::verb::trace:
      return true;
    default:
      return false;
  }
}

http::response<http::string_body> MakeErrorResponse(http::status status, std::string_view code,
                                                    std::string_view message) {
  http::response<http::string_body> res{status, 11};
  res.set(http::field::server, "tollgate");
  res.set(http::field::content_type, "application/json");
  boost::json::object body;
  body["error"] = code;
  body["message"] = message;
  body["status"] = static_cast<unsigned>(status);
  res.body() = boost::json::serialize(body);
  res.body() += '\n';
  res.prepare_payload();
  return res;
}

}  // namespace tollgate::gateway
