#include "gateway/io/handshake_failure.h"

#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <spdlog/spdlog.h>

#include <boost/asio/error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/beast/core/error.hpp>

#include "gateway/telemetry/metrics.h"

namespace tollgate::gateway {
namespace {

HandshakeFailure VerifyFailure(long result) {
  switch (result) {
    case X509_V_ERR_CERT_HAS_EXPIRED:
      return HandshakeFailure::kCertificateExpired;
    case X509_V_ERR_CERT_REVOKED:
      return HandshakeFailure::kCertificateRevoked;
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
      return HandshakeFailure::kUnknownCa;
    default:
      return HandshakeFailure::kBadCertificate;
  }
}

// The lines of this thread's last second: when it began, and how many
// failures were not logged since the last line.
struct LogWindow {
  std::int64_t began_ms = 0;
  bool open = false;
  std::uint64_t left_out = 0;
};

constexpr std::int64_t kLogEveryMs = 1000;

}  // namespace

HandshakeFailureInfo ExplainHandshakeFailure(ssl_st* ssl, const boost::system::error_code& ec) {
  namespace asio = boost::asio;
  if (ec == boost::beast::error::timeout) return {HandshakeFailure::kTimeout, "timed out"};
  if (ec == asio::ssl::error::stream_truncated || ec == asio::error::eof ||
      ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
      ec == asio::error::operation_aborted) {
    return {HandshakeFailure::kClosed, "the client closed the connection"};
  }
  if (ec.category() != asio::error::get_ssl_category())
    return {HandshakeFailure::kProtocol, ec.message()};
  const auto code = static_cast<unsigned long>(ec.value());
  const char* reason = ERR_reason_error_string(code);
  std::string detail = reason != nullptr ? reason : ec.message();
  if (ERR_GET_LIB(code) == ERR_LIB_SSL) {
    if (ERR_GET_REASON(code) == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE) {
      return {HandshakeFailure::kNoCertificate, std::move(detail)};
    }
    if (ERR_GET_REASON(code) == SSL_R_CERTIFICATE_VERIFY_FAILED && ssl != nullptr) {
      const long result = SSL_get_verify_result(ssl);
      return {VerifyFailure(result), detail + ": " + X509_verify_cert_error_string(result)};
    }
  }
  return {HandshakeFailure::kProtocol, std::move(detail)};
}

void LogHandshakeFailure(const HandshakeFailureInfo& failure, std::string_view client,
                         std::string_view listener, std::int64_t now_ms) {
  thread_local LogWindow window;
  if (window.open && now_ms - window.began_ms < kLogEveryMs) {
    ++window.left_out;
    return;
  }
  const std::uint64_t left_out = window.left_out;
  window = {now_ms, true, 0};
  spdlog::info("TLS handshake with {} on {} failed: {} ({}){}", client, listener, failure.detail,
               HandshakeFailureName(failure.reason),
               left_out == 0 ? std::string()
                             : fmt::format("; {} more failed since the last such line", left_out));
}

}  // namespace tollgate::gateway
