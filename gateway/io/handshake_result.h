// How a client's TLS handshake ended: for tollgate_tls_handshakes_total
// (gateway/ops/metrics.h), found by gateway/io/tls.h.
#pragma once

#include <cstdint>

namespace tollgate::gateway {

// kOk: a full handshake; kResumed: a session ticket or ID took its place.
enum class HandshakeResult : std::uint8_t { kOk, kFailed, kResumed };
inline constexpr int kHandshakeResults = 3;

}  // namespace tollgate::gateway
