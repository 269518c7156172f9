// Canonical forms of a request's path and Host, so that rules and routes
// match what an upstream that normalises would serve: without
// them `/%61pi/x`, `//api/x`, `/./api/x` and `/x/../api/x` pass a
// `path_prefix = "/api"` rule untouched while the upstream serves `/api/x`,
// and `api.example.com.` dodges a host rule.
//
// Pure functions; thread-safe; no exceptions; no allocation beyond growing
// the caller's `out` (pass the same string again to reuse its capacity).
//
// Fast path: an input already in canonical form (the common case) costs one
// scan; the functions then return k...Unchanged and leave `out` untouched
// (not even cleared): use the input itself. Only a k...Normalized result
// writes `out` (assigned, not appended). On an error `out` holds unspecified
// contents.
#pragma once

#include <string>
#include <string_view>

namespace tollgate::rules {

enum class PathStatus {
  kUnchanged,    // already canonical: use the input; `out` untouched
  kNormalized,   // `out` holds the canonical path (it differs from the input)
  kNotAbsolute,  // empty, or does not start with '/'
  kBadEncoding,  // a '%' not followed by two hex digits ("%zz", "%2" at the end)
  kNulByte,      // "%00", or a raw NUL byte
  kAboveRoot,    // a ".." segment would climb above "/" ("/../x", "/a/../../x")
};

// True for the four errors: answer 400 (nginx answers 400 to all of them).
constexpr bool IsPathError(PathStatus s) {
  return s != PathStatus::kUnchanged && s != PathStatus::kNormalized;
}

// The canonical form of the path of an origin-form request target (the part
// before '?'; the caller splits the query off, and leaves "*" alone), in the
// steps nginx and Envoy take:
//  1. Percent-decoding of exactly the unreserved characters (RFC 3986 §2.3:
//     ALPHA DIGIT - . _ ~): "%61" -> "a", "%2E" -> ".". Every other escape
//     stays encoded with its hex digits in upper case ("%2f" -> "%2F",
//     "%c3%a9" -> "%C3%A9"), so the result means the same to any server.
//  2. Removal of dot segments (RFC 3986 §5.2.4), decoded ones included:
//     "/./a" -> "/a", "/x/../a" -> "/a", "/%2E%2E/" counts as "/../". A path
//     whose last segment is "." or ".." ends with '/': "/a/." -> "/a/",
//     "/a/b/.." -> "/a/". A ".." at the root is an error (kAboveRoot), as in
//     nginx, rather than dropped as RFC 3986 does for URI references.
//  3. Merging of repeated slashes: "//a///b" -> "/a/b"; a trailing slash
//     stays ("/a/" is not "/a").
// Choices:
//  - An encoded slash ("%2F", "%2f") is kept encoded (as "%2F") and is never a
//    segment separator: "/a%2F..%2Fb" is one segment. This is Envoy's default
//    (`path_with_escaped_slashes_action: KEEP_UNCHANGED`; its "MERGE_SLASHES"
//    normalisation) and RFC 3986's view (%2F is data, not a delimiter).
//    nginx differs: it decodes every escape, %2F included, before resolving
//    dots and merging slashes for `location` matching (while proxy_pass
//    without a URI forwards the original target). So an upstream that decodes
//    %2F into '/' before routing (nginx, many frameworks) serves
//    "/x%2F..%2Fapi/y" as "/api/y" while the rules saw "/x%2F..%2Fapi/y";
//    in front of such an upstream, refuse paths containing "%2F" (Envoy's
//    REJECT_REQUEST) -- the caller can test `path.find("%2F")` on the result.
//  - A backslash (raw or "%5C") is an ordinary byte, not a separator, as in
//    RFC 3986 and nginx on Unix: "/a\..\b" is one segment, left alone.
//    Envoy's `normalize_path` (Chromium's canonicaliser) turns '\' into '/',
//    as do IIS and some frameworks: an upstream that does sees a path the
//    rules did not (refuse '\' and "%5C" in front of one).
//  - Other bytes (non-ASCII, controls other than NUL, reserved characters such
//    as ';' or ':') are kept as they are; the HTTP parser already refused
//    what a request line may not carry.
// Idempotent: normalising a result again gives kUnchanged. A kUnchanged or
// kNormalized result starts with '/' and contains no "//", no "/./", no
// "/../", does not end with "/." or "/..", holds no NUL and no escape of an
// unreserved character or of NUL, and every escape in it is '%' followed by
// two upper-case hex digits.
PathStatus NormalizePath(std::string_view path, std::string& out);

enum class HostStatus {
  kUnchanged,   // already canonical: use the input; `out` untouched
  kNormalized,  // `out` holds the canonical host (it differs from the input)
  kInvalid,     // empty name, ".." in the name, or a malformed "[...]" literal
};

// The canonical form of a Host field's value (or an absolute-form target's
// authority): "name[:port]" or "[IP-literal][:port]".
//  - ASCII letters are lower-cased (the whole value: an IPv6 literal's hex
//    digits too, which keeps it valid; the port is digits).
//  - One trailing dot of the name is removed ("api.example.com." and
//    "api.example.com.:8080" -> "api.example.com", "api.example.com:8080"):
//    the fully qualified spelling of the same name. Not inside "[...]".
//  - The port, when present, is kept as it is.
//  - kInvalid, as nginx answers 400 ("invalid host"): an empty name ("",
//    ".", ":80"), two dots in a row in the name ("a..b", "a.."), a '['
//    without its ']', or anything but ":port" after the ']'.
// The bytes themselves are not checked here (gateway's CheckRequestHeader
// does that). Idempotent: normalising a result again gives kUnchanged.
//
// Not the same as NormalizeHost(host) of rules/route_table.h, which returns
// the name without its port (and keeps a trailing dot).
HostStatus NormalizeHost(std::string_view host, std::string& out);

// For configured values, which must be written as requests are seen
// (otherwise a route or rule would silently never match): `prefix` or
// `host` in canonical form into `out`; false when it has none (an invalid
// path or host), `out` then unspecified.
bool CanonicalPathPrefix(std::string_view prefix, std::string& out);
bool CanonicalHost(std::string_view host, std::string& out);

namespace detail {
// NormalizePath without the fast path: always writes `out` on success and
// returns kNormalized even when `out` equals the input. For tests and the
// fuzzer, which check that the fast path agrees with it.
PathStatus NormalizePathSlow(std::string_view path, std::string& out);
}  // namespace detail

}  // namespace tollgate::rules
