// Request IDs (X-Request-Id), as nginx's $request_id and Envoy's
// x-request-id: every request gets one, which the upstream, the access log
// and tollgate's own answers carry, so that one request can be followed
// through the proxies, the gateway and the upstream. A trusted proxy's
// (identity.trusted_proxies) valid X-Request-Id is kept; anyone else's is
// replaced, as Envoy does for an external request (use_remote_address,
// preserve_external_request_id off): a client must not choose the ID that
// operators look requests up by. New IDs are 32 lowercase hex digits, made
// without a system call or a lock (a per-thread random seed, drawn once,
// and a counter) and unique across threads and restarts. Light (no Beast):
// identify.h's AssignRequestId puts the ID in a request's fields.
// Thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tollgate::gateway {

inline constexpr std::string_view kRequestIdField = "X-Request-Id";
// The longest ID kept from a trusted proxy, in bytes.
inline constexpr std::size_t kMaxRequestIdBytes = 200;
inline constexpr std::size_t kNewRequestIdBytes = 32;

// Whether `id` may be kept: 1 to kMaxRequestIdBytes visible ASCII
// characters (0x21..0x7E).
bool ValidRequestId(std::string_view id);

// Appends a new ID (kNewRequestIdBytes hex digits) to `out`.
void AppendNewRequestId(std::string& out);

// `id`, after giving it a new ID when it is empty (a request whose header
// could not be read has none yet).
std::string_view EnsureRequestId(std::string& id);

// Appends "X-Request-Id: <id>\r\n" when `id` is not empty.
void AppendRequestIdLine(std::string_view id, std::string& out);

}  // namespace tollgate::gateway
