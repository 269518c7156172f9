// How a client's TLS handshake ended: for tollgate_tls_handshakes_total
// (gateway/telemetry/metrics.h), found by gateway/io/tls.h; and why one failed,
// for tollgate_tls_handshake_failures_total, found by
// gateway/io/handshake_failure.h.
#pragma once

#include <cstdint>

namespace tollgate::gateway {

// kOk: a full handshake; kResumed: a session ticket or ID took its place.
enum class HandshakeResult : std::uint8_t { kOk, kFailed, kResumed };
inline constexpr int kHandshakeResults = 3;

// kNoCertificate: client_cert = "require" and the client sent none;
// kCertificateExpired, kCertificateRevoked, kUnknownCa (not issued by
// client_ca), kBadCertificate (any other verification failure); kProtocol:
// no common version, cipher or ALPN, not TLS at all, or an alert from the
// client; kTimeout: not done within timeouts.client_header; kClosed: the
// client closed or reset the connection during the handshake.
enum class HandshakeFailure : std::uint8_t {
  kNoCertificate,
  kCertificateExpired,
  kCertificateRevoked,
  kUnknownCa,
  kBadCertificate,
  kProtocol,
  kTimeout,
  kClosed,
};
inline constexpr int kHandshakeFailures = 8;

}  // namespace tollgate::gateway
