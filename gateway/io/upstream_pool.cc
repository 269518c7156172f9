#include "gateway/io/upstream_pool.h"

#include <openssl/ssl.h>
#include <sys/socket.h>

#include <spdlog/spdlog.h>

#include <cerrno>

#include "gateway/io/draining_read.h"
#include "gateway/io/socket_internals.h"
#include "gateway/io/tls.h"

namespace tollgate::gateway {
namespace {
constexpr std::size_t kUpstreamReadSize = 16 * 1024;

// Bytes of a TLS connection read off the socket but not yet taken by the
// parser: decrypted in the SSL object, or records waiting in its read-ahead
// buffer (TlsStream receives all the socket holds at once, records the
// response did not need included).
bool TlsHoldsBytes(UpstreamConnection& c) {
  auto* tls = std::get_if<TlsStream>(&c.stream);
  return tls != nullptr && SSL_has_pending(tls->native_handle()) == 1;
}

// True when the idle connection holds nothing: no bytes the upstream sent
// after its last response (they would answer the next request, from another
// client), no end of stream, no error. The TLS layer's buffers, then the
// reactor's record (nothing arrived since the last read drained the socket,
// as nginx knows from epoll: no system call), else one non-blocking peek; a
// TLS connection's raw socket counts too, so a late TLS record (a session
// ticket) also retires it, which costs a connect.
bool QuietWhileIdle(UpstreamConnection& c, IdleCheck check) {
  if (TlsHoldsBytes(c)) return false;
  TcpSocket& socket = Lowest(c.stream).socket();
  if (check == IdleCheck::kRecord && !ReadMayFindData(socket)) return true;
  char byte;
  for (;;) {
    const ssize_t n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}
}  // namespace

UpstreamPool::UpstreamPool(const rules::UpstreamConfig& config,
                           std::vector<tcp::endpoint> endpoints, ssl::context* tls,
                           const store::Clock& clock)
    : config_(config), servers_(endpoints.size()), tls_(tls), clock_(clock) {
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    servers_[i].endpoint = endpoints[i];
    servers_[i].name = config.servers[i].ToString();
  }
}

std::size_t UpstreamPool::NextServer() const {
  const std::int64_t now = clock_.NowMs();
  // Round-robin over healthy servers; when all are down, the one that comes
  // back first is tried anyway rather than failing without trying.
  std::size_t best = next_ % servers_.size();
  for (std::size_t i = 0; i < servers_.size(); ++i) {
    const std::size_t candidate = (next_ + i) % servers_.size();
    if (servers_[candidate].down_until_ms <= now) {
      best = candidate;
      break;
    }
    if (servers_[candidate].down_until_ms < servers_[best].down_until_ms) best = candidate;
  }
  return best;
}

std::size_t UpstreamPool::PickServer() {
  const std::size_t server = NextServer();
  next_ = server + 1;
  return server;
}

std::unique_ptr<UpstreamConnection> UpstreamPool::PopIdle(std::size_t server, IdleCheck check) {
  auto& idle = servers_[server].idle;
  const std::int64_t now = clock_.NowMs();
  while (!idle.empty()) {
    std::unique_ptr<UpstreamConnection> c = std::move(idle.back());
    idle.pop_back();
    if (now - c->idle_since_ms < config_.idle_timeout_ms && QuietWhileIdle(*c, check)) return c;
  }
  return nullptr;
}

ConnectResult UpstreamPool::TakeIdle(IdleCheck check) {
  const std::size_t server = NextServer();
  std::unique_ptr<UpstreamConnection> c = PopIdle(server, check);
  if (!c) return {};
  next_ = server + 1;
  return ConnectResult{std::move(c), ConnectFailure::kNone, servers_[server].name};
}

Task<ConnectResult> UpstreamPool::Acquire(std::int64_t connect_timeout_ms, IdleCheck check) {
  ConnectResult last;
  for (std::size_t attempt = 0; attempt < servers_.size(); ++attempt) {
    const std::size_t server = PickServer();
    if (std::unique_ptr<UpstreamConnection> c = PopIdle(server, check)) {
      co_return ConnectResult{std::move(c), ConnectFailure::kNone, servers_[server].name};
    }
    last = co_await Connect(server, connect_timeout_ms, Alpn::kNone);
    if (last.connection) co_return last;
  }
  co_return last;
}

Task<ConnectResult> UpstreamPool::ConnectFresh(std::int64_t connect_timeout_ms) {
  ConnectResult last;
  for (std::size_t attempt = 0; attempt < servers_.size(); ++attempt) {
    last = co_await Connect(PickServer(), connect_timeout_ms, Alpn::kNone);
    if (last.connection) co_return last;
  }
  co_return last;
}

Task<ConnectResult> UpstreamPool::Connect(std::size_t server, std::int64_t timeout_ms,
                                          Alpn alpn) {
  auto executor = co_await asio::this_coro::executor;
  ConnectResult result;
  result.server = ServerName(server);
  auto c = std::make_unique<UpstreamConnection>(
      UpstreamConnection{TcpStream(executor), beast::flat_buffer(), server, 0, false});
  c->buffer.reserve(kUpstreamReadSize);  // see Http1Connection: Beast reads into spare capacity
  TcpStream& tcp_stream = std::get<TcpStream>(c->stream);
  tcp_stream.expires_after(Ms(timeout_ms));
  auto [ec] = co_await tcp_stream.async_connect(servers_[server].endpoint, kUseTuple);
  if (!ec) {
    tcp_stream.socket().set_option(tcp::no_delay(true), ec);
    EnableDrainingReads(tcp_stream.socket().native_handle());
    ec = {};
    if (tls_ != nullptr) {
      // Move out first: emplace destroys the alternative being moved from.
      TcpStream connected = std::move(tcp_stream);
      c->stream.emplace<TlsStream>(std::move(connected), *tls_);
      TlsStream& tls = std::get<TlsStream>(c->stream);
      const std::string sni = config_.tls && !config_.tls->sni.empty()
                                  ? config_.tls->sni
                                  : config_.servers[server].host;
      SSL_set_tlsext_host_name(tls.native_handle(), sni.c_str());
      if (alpn == Alpn::kH2) {
        static constexpr unsigned char kAlpnH2[] = {2, 'h', '2'};
        SSL_set_alpn_protos(tls.native_handle(), kAlpnH2, sizeof kAlpnH2);
      }
      if (config_.tls && config_.tls->verify && !VerifyPeerName(tls.native_handle(), sni)) {
        ec = ssl::error::unexpected_result;
      } else {
        auto [hs_ec] = co_await tls.async_handshake(ssl::stream_base::client, kUseTuple);
        ec = hs_ec;
      }
    }
  }
  if (ec) {
    result.failure =
        ec == beast::error::timeout ? ConnectFailure::kTimeout : ConnectFailure::kRefused;
    MarkDown(server);
    co_return result;
  }
  servers_[server].down_until_ms = 0;
  result.connection = std::move(c);
  co_return result;
}

void UpstreamPool::MarkDown(std::size_t server) {
  servers_[server].down_until_ms = clock_.NowMs() + config_.fail_timeout_ms;
}

void UpstreamPool::Release(std::unique_ptr<UpstreamConnection> connection) {
  // Bytes read past the end of the response belong to no request: as nginx
  // ("upstream sent more data than specified"), such a connection is closed.
  if (connection->buffer.size() > 0 || TlsHoldsBytes(*connection)) {
    spdlog::warn("upstream \"{}\" ({}) sent more data than its response: connection closed",
                 config_.name, servers_[connection->server].name);
    return;
  }
  auto& idle = servers_[connection->server].idle;
  if (config_.max_idle <= 0) return;
  if (static_cast<std::int64_t>(idle.size()) >= config_.max_idle && !trim_posted_) {
    // Trim() closes the oldest rather than refuse the newest (the newest is
    // warm), at the end of this turn.
    trim_posted_ = true;
    asio::post(Lowest(connection->stream).get_executor(),
               [pool = std::weak_ptr<UpstreamPool*>(self_)] {
                 if (const auto alive = pool.lock()) (*alive)->Trim();
               });
  }
  connection->reused = true;
  connection->idle_since_ms = clock_.NowMs();
  Lowest(connection->stream).expires_never();
  idle.push_back(std::move(connection));
}

void UpstreamPool::Trim() {
  trim_posted_ = false;
  for (Server& server : servers_) {
    while (static_cast<std::int64_t>(server.idle.size()) > config_.max_idle) {
      server.idle.pop_front();
    }
  }
}

}  // namespace tollgate::gateway
