#include "gateway/http2/upstream_pool.h"

namespace tollgate::gateway {

Http2UpstreamPool::Http2UpstreamPool(const rules::UpstreamConfig& config,
                                     std::vector<tcp::endpoint> endpoints, ssl::context* tls,
                                     const store::Clock& clock,
                                     const Http2UpstreamOptions& options)
    : connector_(config, std::move(endpoints), tls, clock), options_(options) {
  const Http2Transport transport = config.protocol == rules::UpstreamProtocol::kH2
                                       ? Http2Transport::kTls
                                       : Http2Transport::kCleartext;
  for (std::size_t i = 0; i < connector_.server_count(); ++i) {
    sessions_.push_back(
        std::make_unique<Http2UpstreamConnection>(connector_, i, transport, options_, stats_));
  }
}

Task<Http2OpenResult> Http2UpstreamPool::Open(const http::request_header<Fields>& head,
                                              Http2Body body,
                                              std::chrono::steady_clock::duration connect_timeout) {
  Http2OpenResult last;
  for (std::size_t attempt = 0; attempt < sessions_.size(); ++attempt) {
    last = co_await sessions_[connector_.PickServer()]->Open(head, body, connect_timeout);
    if (last.failure == ConnectFailure::kNone) break;
  }
  co_return last;
}

std::size_t Http2UpstreamPool::connections() const {
  std::size_t n = 0;
  for (const auto& session : sessions_) n += session->connections();
  return n;
}

Http2UpstreamOptions Http2OptionsFor(const rules::UpstreamConfig& config,
                                     std::chrono::milliseconds write_timeout) {
  Http2UpstreamOptions options;
  options.idle_timeout = std::chrono::milliseconds(config.idle_timeout_ms);
  options.write_timeout = write_timeout;
  return options;
}

}  // namespace tollgate::gateway
