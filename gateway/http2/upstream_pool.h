// HTTP/2 connections from one I/O thread to the servers of one upstream
// (protocol = "h2" or "h2c"): the counterpart of UpstreamPool
// (gateway/io/upstream_pool.h) for multiplexed connections. Each request
// goes to the next healthy server in round-robin order, as there; a server
// that fails to connect (or to speak HTTP/2) is skipped for fail_timeout;
// on that server its streams share connections (upstream_connection.h). One
// instance per thread and upstream: not thread-safe, and never needs to be.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gateway/http2/upstream_connection.h"
#include "gateway/io/net.h"
#include "gateway/io/upstream_pool.h"
#include "rules/config.h"
#include "base/clock.h"

namespace tollgate::gateway {

class Http2UpstreamPool {
 public:
  // As UpstreamPool's: `endpoints[i]` is the resolved address of
  // config.servers[i]; `tls` (with h2) must outlive the pool. The pool
  // outlives every stream it opened.
  Http2UpstreamPool(const rules::UpstreamConfig& config, std::vector<tcp::endpoint> endpoints,
                    ssl::context* tls, const store::Clock& clock,
                    const Http2UpstreamOptions& options);

  // A stream to the next healthy server (see Http2UpstreamConnection::Open),
  // trying every server at most once, each within `connect_timeout`.
  Task<Http2OpenResult> Open(const http::request_header<Fields>& head, Http2Body body,
                             std::chrono::steady_clock::duration connect_timeout);

  const std::string& name() const { return connector_.name(); }
  const Http2UpstreamStats& stats() const { return stats_; }
  // Open connections to all servers.
  std::size_t connections() const;

 private:
  UpstreamPool connector_;
  Http2UpstreamOptions options_;
  Http2UpstreamStats stats_;
  std::vector<std::unique_ptr<Http2UpstreamConnection>> sessions_;  // per server
};

// The options of `config`'s pool: its idle_timeout, the write deadline
// given (timeouts.upstream_response), the defaults for the rest.
Http2UpstreamOptions Http2OptionsFor(const rules::UpstreamConfig& config,
                                     std::chrono::milliseconds write_timeout);

}  // namespace tollgate::gateway
