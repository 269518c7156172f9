// Connections from one I/O thread to the servers of one upstream:
// round-robin choice, passive health (a server that fails to connect is
// skipped for `fail_timeout`) and a bounded pool of idle keep-alive
// connections per server. One instance per thread and upstream: not
// thread-safe, and never needs to be.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "gateway/io/net.h"
#include "rules/config.h"
#include "base/clock.h"

namespace tollgate::gateway {

struct UpstreamConnection {
  AnyStream stream;
  beast::flat_buffer buffer;
  std::size_t server = 0;
  std::int64_t idle_since_ms = 0;
  bool reused = false;  // served a request before: may have been closed meanwhile
};

enum class ConnectFailure { kNone, kRefused, kTimeout };

// What a TLS connection offers in ALPN: nothing (HTTP/1.1 is what a server
// assumes then), or "h2" alone.
enum class Alpn { kNone, kH2 };

struct ConnectResult {
  std::unique_ptr<UpstreamConnection> connection;
  ConnectFailure failure = ConnectFailure::kNone;
  std::string_view server;  // "host:port" tried last (the pool's own string)
};

// How a pooled connection is checked before its reuse for nothing having
// arrived while it idled (bytes, the upstream's end of stream): kRecord
// trusts the event loop's record, which can miss an event collected in this
// turn but not yet handled, so only for a request sent again on a fresh
// connection when the reused one turns out closed (UpstreamCall::
// replayable); kPeek looks at the socket with a system call.
enum class IdleCheck : std::uint8_t { kRecord, kPeek };

class UpstreamPool {
 public:
  // `endpoints[i]` is the resolved address of config.servers[i]; `tls` is
  // null for plain HTTP upstreams and must outlive the pool.
  UpstreamPool(const rules::UpstreamConfig& config, std::vector<tcp::endpoint> endpoints,
               ssl::context* tls, const store::Clock& clock);
  UpstreamPool(const UpstreamPool&) = delete;  // a posted Trim() refers to it
  UpstreamPool& operator=(const UpstreamPool&) = delete;

  // A pooled connection to the next healthy server, or a new one. Tries
  // every server at most once.
  Task<ConnectResult> Acquire(std::int64_t connect_timeout_ms, IdleCheck check);
  // Acquire()'s answer when it needs no connect, without a coroutine: a
  // pooled connection to the server Acquire() would try first. No
  // connection: nothing was chosen, Acquire() makes the same choice.
  ConnectResult TakeIdle(IdleCheck check);
  // A fresh connection (never pooled), for the retry of a stale one.
  Task<ConnectResult> ConnectFresh(std::int64_t connect_timeout_ms);
  // Returns a connection whose last exchange completed cleanly. Beyond
  // max_idle, the oldest idle connections are closed at the end of the
  // event-loop turn (see Trim), not at once.
  void Release(std::unique_ptr<UpstreamConnection> connection);

  const std::string& name() const { return config_.name; }
  // "host:port" of config.servers[server], as configured.
  const std::string& ServerName(std::size_t server) const { return servers_[server].name; }
  std::size_t server_count() const { return servers_.size(); }

  // For pools that keep connections of their own (HTTP/2 multiplexes
  // streams over them, gateway/http2/upstream_pool.h): the next healthy
  // server in round-robin order, moving the order on.
  std::size_t PickServer();
  // A new connection to `server` (TCP, then TLS with the upstream's
  // settings, offering `alpn`). A failure marks the server down for
  // fail_timeout, a success up.
  Task<ConnectResult> Connect(std::size_t server, std::int64_t timeout_ms, Alpn alpn);
  // `server` failed after connecting (it does not speak the protocol): down
  // for fail_timeout, as after a failed connect.
  void MarkDown(std::size_t server);

 private:
  struct Server {
    tcp::endpoint endpoint;
    std::string name;  // formatted once: every exchange logs it
    std::int64_t down_until_ms = 0;
    std::deque<std::unique_ptr<UpstreamConnection>> idle;
  };

  // The next healthy server in round-robin order.
  std::size_t NextServer() const;
  // A connection of `server`'s that has not idled past idle_timeout, if any;
  // older ones are closed on the way.
  std::unique_ptr<UpstreamConnection> PopIdle(std::size_t server, IdleCheck check);

  // Closes the oldest idle connections of each server beyond max_idle.
  // Release() posts it once per turn of the event loop: the connections that
  // went idle in this turn's handlers first serve the requests of the same
  // turn. Closing the surplus at once (as nginx's keepalive cache does)
  // made a burst of responses close connections that the burst of requests
  // after it, in the same turn, then opened again: with 512 HTTP/2 streams
  // in flight over max_idle = 64, 0.46 new upstream connections per request
  // against 0.1-0.2 this way. When the worker waits for events, no server has
  // more than max_idle idle connections.
  void Trim();

  const rules::UpstreamConfig& config_;
  std::vector<Server> servers_;
  ssl::context* tls_;
  const store::Clock& clock_;
  std::size_t next_ = 0;
  bool trim_posted_ = false;
  // Expires with the pool: a Trim() posted before a reload dropped it does
  // nothing.
  std::shared_ptr<UpstreamPool*> self_ = std::make_shared<UpstreamPool*>(this);
};

}  // namespace tollgate::gateway
