// Header rules of a reverse proxy (RFC 9110 §7.6) and tollgate's own error
// answers. Pure functions over Beast messages; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "gateway/io/net.h"

namespace tollgate::rules {
struct Identity;
struct IdentityConfig;
}  // namespace tollgate::rules

namespace tollgate::gateway {

// Removes Connection, Keep-Alive, Proxy-Connection, TE, Trailer,
// Transfer-Encoding, Upgrade, Proxy-Authenticate, Proxy-Authorization,
// HTTP2-Settings and every header named in Connection. Framing is set again by the caller.
void RemoveHopByHop(Fields& fields);

// What a proxy must check in a request's header before acting on it
// (RFC 9112): a request target in origin-form ("/path?query"), "*" for
// OPTIONS, or absolute-form ("http://host/path"), which every server must
// accept and which stands for its origin-form with the authority as Host; one
// Host field (none at all is fine before HTTP/1.1) with a valid value; and a
// Transfer-Encoding only when its last coding is chunked (otherwise the
// body's end is unknown and what follows it would be taken for the next
// request). The method must be uppercase, the target without a fragment,
// Host (or :authority) a host and port without userinfo. `scheme`: an
// HTTP/2 request's :scheme, which must be http or https (nghttp2 has
// checked that its :path is a path); empty for HTTP/1.x. `problem`:
// empty when the request may go on, else why it is refused with 400 (and
// the connection closed). The one check of a request's head, whatever
// protocol brought it.
struct RequestHeaderCheck {
  std::string_view host;  // the Host field's value ("" when absent)
  // Absolute-form only: the target as origin-form and its authority, which
  // replace the request's target and Host; empty otherwise.
  std::string origin_form;
  std::string authority;
  std::string_view problem;  // empty: the header is fine
  http::status status = http::status::bad_request;  // the answer to a problem
};
RequestHeaderCheck CheckRequestHeader(const http::request_header<Fields>& header, bool chunked,
                                      std::string_view scheme = {});

enum class Scheme { kHttp, kHttps };

// What a request's fields say of who sent it, once `identity` is resolved
// and before PrepareForwardedRequest. Field names are compared as CGI
// servers see them (case-insensitive, '_' for '-': X_User_Id is their
// X-User-Id). From a peer that is not a trusted proxy nothing of it passes:
// every spelling of user_header and role_header, of X-Real-IP and of
// True-Client-IP, and Forwarded, are removed. From a trusted proxy they pass
// in their own spelling only (tollgate reads no other), and X-Real-IP is set
// to the client it found in X-Forwarded-For (or the text that stood for it;
// see Identity::unidentified_client). With [identity.client_cert], every
// spelling of its subject_header and sha256_header is removed, from anyone,
// and they are set from the connection's verified certificate, if any.
// One walk over the fields.
void ScrubIdentityFields(Fields& fields, const rules::IdentityConfig& config,
                         const rules::Identity& identity);

// The fields of a client's request trailers that reach the upstream: none
// that frames, routes or authenticates a request (Host, Content-*,
// Authorization, Cookie, ...; RFC 9110 §6.5.1), none of the hop-by-hop
// ones, and none that forwarding or identity sets or reads (X-Forwarded-*,
// Forwarded, X-Real-IP, True-Client-IP, the user and role headers, the
// client certificate's), in any spelling, whoever sent them: the rules
// decided on the header, and a trailer must not say otherwise behind them.
Fields ForwardableRequestTrailers(const Fields& trailers, const rules::IdentityConfig& config);

// A request's fields as its upstream sees them: hop-by-hop fields removed
// (RemoveHopByHop, but never X-Real-IP) and Expect (tollgate answers it),
// the client appended to X-Forwarded-For (joining repeated lines),
// X-Forwarded-Proto and X-Forwarded-Host (from Host) set, other spellings of
// these three and of X-Real-IP removed; X-Real-IP set to `client_ip` unless
// ScrubIdentityFields set it (for a trusted proxy's client); a Forwarded
// field, which only a trusted proxy's request still has, joined into one
// with tollgate's element appended: for=<client_ip>;proto=<scheme>;host=<Host>
// (RFC 7239: IPv6 and host:port quoted). tollgate adds no Forwarded to a
// request that came without one.
void PrepareForwardedRequest(Fields& fields, std::string_view client_ip, Scheme scheme);
// The same, but the fields it sets are appended to `lines` as
// "Name: value\r\n" lines (for AppendWireHeader's `extra`) instead of being
// inserted into `fields`: for a header that is only serialized, one field
// insert (a node, a copy, a sorted-set insert) fewer per field. Those
// fields then come after the header's own on the wire.
void PrepareForwardedLines(Fields& fields, std::string_view client_ip, Scheme scheme,
                           std::string& lines);

// GET, HEAD, PUT, DELETE, OPTIONS, TRACE: safe to send again on a fresh
// connection when a pooled one turned out to be closed.
bool IsIdempotent(http::verb method);

// {"error":"<code>","message":"<message>","status":<status>} with
// Content-Type application/json; never carries internal details.
http::response<http::string_body> MakeErrorResponse(http::status status, std::string_view code,
                                                    std::string_view message);

}  // namespace tollgate::gateway
