// Why a client's TLS handshake failed, and the operational log's line about
// it (nginx logs the reason at info: without it a refused mTLS client is
// invisible). Thread-safe as LogHandshakeFailure says.
#pragma once

#include <boost/system/error_code.hpp>
#include <cstdint>
#include <string>
#include <string_view>

#include "gateway/telemetry/handshake_result.h"

struct ssl_st;  // OpenSSL's SSL

namespace tollgate::gateway {

struct HandshakeFailureInfo {
  HandshakeFailure reason = HandshakeFailure::kProtocol;
  // For people: OpenSSL's verification error ("certificate has expired")
  // or error reason ("peer did not return a certificate").
  std::string detail;
};

// `ec`: how the server handshake on `ssl` failed.
HandshakeFailureInfo ExplainHandshakeFailure(ssl_st* ssl, const boost::system::error_code& ec);

// Logs "TLS handshake with CLIENT on LISTENER failed: DETAIL (REASON)" at
// info, at most one line per second per thread (`now_ms`: the injected
// clock); the next line logged says how many were left out. Only from the
// worker thread that calls it.
void LogHandshakeFailure(const HandshakeFailureInfo& failure, std::string_view client,
                         std::string_view listener, std::int64_t now_ms);

}  // namespace tollgate::gateway
