#include "gateway/core/http_util.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <boost/url/authority_view.hpp>
#include <boost/url/parse.hpp>
#include <span>
#include <string>
#include <vector>

#include "rules/duration.h"
#include "rules/identity.h"

namespace tollgate::gateway {

namespace {

bool IsHopByHop(http::field name) {
  switch (name) {
    case http::field::connection:
    case http::field::keep_alive:
    case http::field::proxy_connection:
    case http::field::te:
    case http::field::trailer:
    case http::field::transfer_encoding:
    case http::field::upgrade:
    case http::field::proxy_authenticate:
    case http::field::proxy_authorization:
    // A connection's own (RFC 9113 §3.2.1), whether Connection names it.
    case http::field::http2_settings:
      return true;
    default:
      return false;
  }
}

constexpr std::string_view kForwardedFor = "X-Forwarded-For";
constexpr std::string_view kForwardedProto = "X-Forwarded-Proto";
constexpr std::string_view kForwardedHost = "X-Forwarded-Host";
constexpr std::string_view kRealIp = "X-Real-IP";
constexpr std::string_view kTrueClientIp = "True-Client-IP";

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// How a field's name compares with `canonical` as CGI servers name fields
// (HTTP_X_USER_ID for X-User-Id and X_User_Id alike).
enum class Spelling {
  kOther,    // another field
  kSame,     // the same field (HTTP names are case-insensitive)
  kVariant,  // another field to HTTP, the same to CGI: '_' and '-' swapped
};
Spelling CompareName(std::string_view name, std::string_view canonical) {
  if (name.size() != canonical.size() || canonical.empty()) return Spelling::kOther;
  Spelling result = Spelling::kSame;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char a = Lower(name[i]);
    const char b = Lower(canonical[i]);
    if (a == b) continue;
    if ((a != '-' && a != '_') || (b != '-' && b != '_')) return Spelling::kOther;
    result = Spelling::kVariant;
  }
  return result;
}

// A Forwarded parameter's value (RFC 7239 §4): a token as it is, anything
// else quoted; an IPv6 node in brackets ("[2001:db8::1]").
void AppendForwardedValue(std::string_view value, bool node, std::string& out) {
  const bool v6 = node && value.find(':') != std::string_view::npos;
  if (!v6 && rules::IsHeaderName(value)) {  // a token (RFC 9110 §5.6.2)
    out.append(value);
    return;
  }
  out.push_back('"');
  if (v6) out.push_back('[');
  for (const char c : value) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  if (v6) out.push_back(']');
  out.push_back('"');
}

// The bytes of uri-host [":" port] (RFC 3986): a registered name, IPv4 or
// IP-literal, with percent-encoding.
constexpr std::array<bool, 256> kHostBytes = [] {
  std::array<bool, 256> table{};
  for (char c = '0'; c <= '9'; ++c) table[static_cast<unsigned char>(c)] = true;
  for (char c = 'a'; c <= 'z'; ++c) table[static_cast<unsigned char>(c)] = true;
  for (char c = 'A'; c <= 'Z'; ++c) table[static_cast<unsigned char>(c)] = true;
  for (const char c : std::string_view("-._~%!$&'()*+,;=:[]")) {
    table[static_cast<unsigned char>(c)] = true;
  }
  return table;
}();

// uri-host [":" port] (RFC 9110 §7.2), which Host and :authority carry:
// no userinfo ('@' is no host byte), at most one port of digits ("a:80:80"
// is no authority). Empty is valid (a target without authority).
bool IsValidHost(std::string_view host) {
  return host.empty() ||
         (std::all_of(host.begin(), host.end(),
                      [](char c) { return kHostBytes[static_cast<unsigned char>(c)]; }) &&
          boost::urls::parse_authority(host).has_value());
}

// Methods are case-sensitive tokens and every registered one is uppercase;
// "get" is no GET, and a rule or an upstream that reads GET would be
// dodged by it. Refused as nginx refuses it.
bool HasLowercase(std::string_view method) {
  return std::any_of(method.begin(), method.end(), [](char c) { return c >= 'a' && c <= 'z'; });
}

}  // namespace

// The functions below walk the fields once: Beast keeps them in a tree
// ordered by name string, so every lookup or erase by name, even by a field
// enum, is a case-insensitive tree search; most messages carry none of the
// names looked for.

RequestHeaderCheck CheckRequestHeader(const http::request_header<Fields>& header, bool chunked,
                                      std::string_view scheme) {
  RequestHeaderCheck check;
  int hosts = 0;
  int lengths = 0;            // Content-Length values, over every such field
  int codings = 0;            // transfer codings, over every Transfer-Encoding field
  bool other_coding = false;  // one of them is not chunked
  for (const auto& f : header) {
    if (f.name() == http::field::host) {
      if (hosts++ == 0) check.host = f.value();
    } else if (f.name() == http::field::content_length) {
      lengths += 1 + static_cast<int>(std::count(f.value().begin(), f.value().end(), ','));
    } else if (f.name() == http::field::transfer_encoding) {
      for (const auto coding : http::token_list(f.value())) {
        ++codings;
        other_coding = other_coding || !beast::iequals(coding, "chunked");
      }
    }
  }
  const std::string_view target = header.target();
  if (HasLowercase(header.method_string())) {
    check.problem = "the method must be uppercase";
  } else if (!scheme.empty() && scheme != "http" && scheme != "https") {
    check.problem = "the scheme must be http or https";
  } else if (target.find('#') != std::string_view::npos) {
    // A fragment is the client's own (RFC 9110 §4.2.5): never sent.
    check.problem = "the request target must not have a fragment (#)";
  } else if (hosts > 1) {
    check.problem = "more than one Host field";
  } else if (hosts == 0 && header.version() >= 11) {
    check.problem = "an HTTP/1.1 request needs a Host field";
  } else if (!IsValidHost(check.host)) {
    check.problem = "the Host field is not a valid host";
  } else if (lengths > 1) {
    // RFC 9110 §8.6 lets a recipient refuse a list of equal lengths or send
    // one value; refused, as nginx does ("duplicate header line").
    check.problem = "more than one Content-Length value";
  } else if (codings > 0 && !chunked) {
    check.problem = "Transfer-Encoding must end with chunked";
  } else if (other_coding) {
    // As nginx: a coding other than chunked (gzip, chunked) is not relayed
    // (the upstream would get the body without it).
    check.problem = "transfer codings other than chunked are not supported";
    check.status = http::status::not_implemented;
  } else if ((!target.empty() && target.front() == '/') ||
             (target == "*" && header.method() == http::verb::options)) {
    return check;
  } else if (const auto url = boost::urls::parse_absolute_uri(target);
             url &&
             (url->scheme_id() == boost::urls::scheme::http ||
              url->scheme_id() == boost::urls::scheme::https) &&
             url->has_authority() && IsValidHost(url->encoded_host_and_port()) &&
             // RFC 9110 §4.2.4: userinfo in an http(s) URI is an error
             // ("http://trusted@evil/" deceives whoever reads it).
             !url->has_userinfo() &&
             // After an authority the path is empty or begins with '/' (RFC
             // 3986 §3.3). Boost.URL 1.81 parses "http://a:80x/y" as host
             // "a", port "80" and path "x/y" (boostorg/url issue 680; found by
             // fuzz/request_head.cc): the upstream would have got "x/y".
             (url->encoded_path().empty() || url->encoded_path().front() == '/')) {
    check.authority = url->encoded_host_and_port();
    check.origin_form = url->encoded_path().empty() ? "/" : std::string(url->encoded_path());
    if (url->has_query()) {
      check.origin_form += '?';
      check.origin_form += url->encoded_query();
    }
  } else {
    check.problem = "the request target must be a path or an http(s) URL";
  }
  return check;
}

namespace {

// RemoveHopByHop, but a field named `keep` stays even when Connection lists it.
void RemoveHopByHopKeeping(Fields& fields, std::string_view keep) {
  std::vector<std::string> named;  // listed in Connection: hop-by-hop too
  for (auto it = fields.begin(); it != fields.end();) {
    if (!IsHopByHop(it->name())) {
      ++it;
      continue;
    }
    if (it->name() == http::field::connection) {
      for (auto token : http::token_list(it->value())) named.emplace_back(token);
    }
    it = fields.erase(it);
  }
  for (const std::string& name : named) {
    // "Connection: Content-Length" must not strip the message's framing.
    if (beast::iequals(name, "content-length") || beast::iequals(name, "host")) continue;
    if (beast::iequals(name, keep)) continue;
    fields.erase(name);
  }
}

}  // namespace

void RemoveHopByHop(Fields& fields) { RemoveHopByHopKeeping(fields, {}); }

void ScrubIdentityFields(Fields& fields, const rules::IdentityConfig& config,
                         const rules::Identity& identity) {
  const bool trusted = identity.peer_trusted;
  const rules::ClientCertIdentityConfig* cert =
      config.client_cert ? &*config.client_cert : nullptr;
  for (auto it = fields.begin(); it != fields.end();) {
    bool drop = false;
    if (it->name() == http::field::forwarded) {
      drop = !trusted;
    } else {
      const std::string_view name = it->name_string();
      Spelling s = Spelling::kOther;
      if ((s = CompareName(name, config.user_header)) != Spelling::kOther ||
          (s = CompareName(name, config.role_header)) != Spelling::kOther ||
          (s = CompareName(name, kTrueClientIp)) != Spelling::kOther) {
        drop = !trusted || s == Spelling::kVariant;
      } else if (cert != nullptr && (CompareName(name, cert->subject_header) != Spelling::kOther ||
                                     CompareName(name, cert->sha256_header) != Spelling::kOther)) {
        drop = true;  // only the handshake vouches for a certificate
      } else {
        // A trusted proxy's is replaced by the client it named, below.
        drop = CompareName(name, kRealIp) != Spelling::kOther;
      }
    }
    it = drop ? fields.erase(it) : std::next(it);
  }
  if (cert != nullptr && identity.certificate != nullptr) {
    if (!cert->subject_header.empty()) {
      fields.insert(http::field::unknown, cert->subject_header, identity.certificate->subject);
    }
    if (!cert->sha256_header.empty()) {
      fields.insert(http::field::unknown, cert->sha256_header, identity.certificate->sha256);
    }
  }
  if (trusted) {
    fields.insert(http::field::unknown, kRealIp,
                  identity.unidentified_client.empty() ? identity.client_ip.ToString()
                                                       : identity.unidentified_client);
  }
}

namespace {

// Fields a request trailer never carries through (RFC 9110 §6.5.1: framing,
// routing, authentication, request modifiers), nor any field that
// forwarding or identity sets: tollgate decides on the header alone.
constexpr std::string_view kNeverTrailers[] = {
    "Host",           "Authorization",      "Proxy-Authorization", "Cookie",
    "Content-Length", "Content-Type",       "Content-Encoding",    "Content-Range",
    "Expect",         "Range",              "Max-Forwards",        "Forwarded",
    kForwardedFor,    kForwardedProto,      kForwardedHost,        kRealIp,
    kTrueClientIp,    "X-Client-Cert-Subject", "X-Client-Cert-Sha256",
};

bool IsNamedIn(std::string_view name, std::span<const std::string_view> names) {
  return std::any_of(names.begin(), names.end(), [name](std::string_view n) {
    return CompareName(name, n) != Spelling::kOther;
  });
}

}  // namespace

Fields ForwardableRequestTrailers(const Fields& trailers, const rules::IdentityConfig& config) {
  std::vector<std::string_view> configured = {config.user_header, config.role_header};
  if (config.client_cert) {
    configured.push_back(config.client_cert->subject_header);
    configured.push_back(config.client_cert->sha256_header);
  }
  Fields out;
  for (const auto& f : trailers) {
    const std::string_view name = f.name_string();
    if (IsHopByHop(f.name()) || name.empty() || name.front() == ':' ||
        IsNamedIn(name, kNeverTrailers) || IsNamedIn(name, configured)) {
      continue;
    }
    out.insert(f.name(), name, f.value());
  }
  return out;
}

namespace {

// What PrepareForwardedRequest sets, gathered in its one walk over the
// fields (which removes what it replaces).
struct ForwardedFields {
  std::string chain;       // X-Forwarded-For
  std::string_view proto;  // X-Forwarded-Proto
  std::string_view host;   // X-Forwarded-Host: the first Host field's (it stays in place)
  bool real_ip = false;    // X-Real-IP is there already
  std::string forwarded;   // Forwarded, when the request had one
};

ForwardedFields CollectForwarded(Fields& fields, std::string_view client_ip, Scheme scheme) {
  RemoveHopByHopKeeping(fields, kRealIp);  // ScrubIdentityFields' for a trusted proxy
  ForwardedFields out;
  std::string& chain = out.chain;
  std::string& forwarded = out.forwarded;
  std::string_view& host = out.host;
  for (auto it = fields.begin(); it != fields.end();) {
    if (it->name() == http::field::host) {
      if (host.empty()) host = it->value();
    } else if (it->name() == http::field::expect) {
      it = fields.erase(it);
      continue;
    } else if (it->name() == http::field::forwarded) {
      if (!forwarded.empty()) forwarded += ", ";
      forwarded.append(it->value().data(), it->value().size());
      it = fields.erase(it);
      continue;
    } else if (it->name() == http::field::unknown) {
      const std::string_view name = it->name_string();
      const Spelling xff = CompareName(name, kForwardedFor);
      if (xff == Spelling::kSame) {
        if (!chain.empty()) chain += ", ";
        chain.append(it->value().data(), it->value().size());
        it = fields.erase(it);
        continue;
      }
      const Spelling real = CompareName(name, kRealIp);
      if (xff == Spelling::kVariant || real == Spelling::kVariant ||
          CompareName(name, kForwardedProto) != Spelling::kOther ||
          CompareName(name, kForwardedHost) != Spelling::kOther) {
        it = fields.erase(it);
        continue;
      }
      if (real == Spelling::kSame) out.real_ip = true;
    }
    ++it;
  }
  if (!chain.empty()) chain += ", ";
  chain.append(client_ip);
  out.proto = scheme == Scheme::kHttps ? "https" : "http";
  if (!forwarded.empty()) {
    forwarded += ", for=";
    AppendForwardedValue(client_ip, true, forwarded);
    forwarded += ";proto=";
    forwarded += out.proto;
    if (!host.empty()) {
      forwarded += ";host=";
      AppendForwardedValue(host, false, forwarded);
    }
  }
  return out;
}

void AppendLine(std::string_view name, std::string_view value, std::string& lines) {
  lines.append(name.data(), name.size());
  lines.append(": ");
  lines.append(value.data(), value.size());
  lines.append("\r\n");
}

}  // namespace

void PrepareForwardedRequest(Fields& fields, std::string_view client_ip, Scheme scheme) {
  const ForwardedFields f = CollectForwarded(fields, client_ip, scheme);
  fields.insert(http::field::unknown, kForwardedFor, f.chain);
  fields.insert(http::field::unknown, kForwardedProto, f.proto);
  if (!f.host.empty()) fields.insert(http::field::unknown, kForwardedHost, f.host);
  if (!f.real_ip) fields.insert(http::field::unknown, kRealIp, client_ip);
  if (!f.forwarded.empty()) fields.insert(http::field::forwarded, f.forwarded);
}

void PrepareForwardedLines(Fields& fields, std::string_view client_ip, Scheme scheme,
                           std::string& lines) {
  const ForwardedFields f = CollectForwarded(fields, client_ip, scheme);
  // Sized once: appended piece by piece, the string grew (a copy each time)
  // four or five times.
  constexpr std::size_t kLine = 4;  // ": " and CRLF
  lines.reserve(lines.size() + kForwardedFor.size() + f.chain.size() + kForwardedProto.size() +
                f.proto.size() + kForwardedHost.size() + f.host.size() + kRealIp.size() +
                client_ip.size() + f.forwarded.size() + sizeof "Forwarded" + 5 * kLine);
  AppendLine(kForwardedFor, f.chain, lines);
  AppendLine(kForwardedProto, f.proto, lines);
  if (!f.host.empty()) AppendLine(kForwardedHost, f.host, lines);
  if (!f.real_ip) AppendLine(kRealIp, client_ip, lines);
  if (!f.forwarded.empty()) AppendLine("Forwarded", f.forwarded, lines);
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
