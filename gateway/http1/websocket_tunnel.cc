#include "gateway/http1/websocket_tunnel.h"

#include <openssl/evp.h>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/write.hpp>
#include <memory>

#include "gateway/ops/metrics.h"
#include "gateway/io/relay.h"
#include "store/loop_time.h"

namespace tollgate::gateway {
namespace {

constexpr std::string_view kGuid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

bool HasToken(std::string_view value, std::string_view token) {
  for (const auto& t : http::token_list(value)) {
    if (beast::iequals(t, token)) return true;
  }
  return false;
}

template <typename Fn>
auto Visit(AnyStream& stream, Fn&& fn) {
  return std::visit(std::forward<Fn>(fn), stream);
}

// One tunnel's shared state; lives in RunTunnel's frame while its three
// parts (two directions and the watchdog) run.
struct Tunnel {
  Tunnel(AnyStream& c, AnyStream& u, const TunnelOptions& o)
      : client(c), upstream(u), options(o), watchdog(Lowest(c).get_executor()) {}

  // Ends the tunnel: pending reads and writes on both streams complete
  // with operation_aborted, the watchdog wakes; each part sees `stopped`
  // before it would start anything else.
  void Stop() {
    if (stopped) return;
    stopped = true;
    Lowest(client).cancel();
    Lowest(upstream).cancel();
    watchdog.cancel();
  }

  AnyStream& client;
  AnyStream& upstream;
  const TunnelOptions& options;
  Timer watchdog;
  std::chrono::steady_clock::time_point last_activity = store::LoopNow();
  bool stopped = false;
  TunnelResult result;
};

// Writes `data` whole to `to` within the idle time; counts it.
Task<bool> WriteAll(Tunnel& t, AnyStream& to, asio::const_buffer data, bool in) {
  Lowest(to).expires_after(t.options.idle);
  auto [ec, n] = co_await Visit(to, [&](auto& s) { return asio::async_write(s, data, kUseTuple); });
  if (n > 0) {
    t.last_activity = store::LoopNow();
    (in ? t.result.bytes_in : t.result.bytes_out) += n;
    if (t.options.metrics != nullptr) {
      t.options.metrics->AddWebSocketBytes(t.options.route_metric, in, n);
    }
  }
  co_return !ec && !t.stopped;
}

// One direction: `from` to `to`, what `pending` holds first.
Task<void> Pump(Tunnel& t, AnyStream& from, beast::flat_buffer& pending, AnyStream& to,
                char* buffer, bool in) {
  bool ok = true;
  if (pending.size() > 0) {
    ok = co_await WriteAll(t, to, pending.data(), in);
    pending.consume(pending.size());
  }
  while (ok && !t.stopped) {
    Lowest(from).expires_never();
    auto [ec, n] = co_await Visit(from, [&](auto& s) {
      return s.async_read_some(asio::buffer(buffer, kRelayChunk), kUseTuple);
    });
    if (t.stopped) break;
    if (n > 0) {
      t.last_activity = store::LoopNow();
      ok = co_await WriteAll(t, to, asio::buffer(buffer, n), in);
    }
    if (ec) break;  // end of stream, reset, or TLS truncation: the tunnel ends
  }
  t.Stop();
}

// Ends the tunnel once no byte went either way for the idle time.
Task<void> Watch(Tunnel& t) {
  while (!t.stopped) {
    const auto due = t.last_activity + t.options.idle;
    if (store::LoopNow() >= due) {
      t.result.idle_timeout = true;
      t.Stop();
      break;
    }
    t.watchdog.expires_at(due);
    co_await t.watchdog.async_wait(kUseTuple);
  }
}

// Counts a tunnel in tollgate_websocket_connections while it is open.
class OpenGauge {
 public:
  OpenGauge(ThreadMetrics* metrics, int route) : metrics_(metrics), route_(route) {
    if (metrics_ != nullptr) metrics_->AddWebSockets(route_, 1);
  }
  ~OpenGauge() {
    if (metrics_ != nullptr) metrics_->AddWebSockets(route_, -1);
  }
  OpenGauge(const OpenGauge&) = delete;
  OpenGauge& operator=(const OpenGauge&) = delete;

 private:
  ThreadMetrics* metrics_;
  int route_;
};

}  // namespace

bool IsWebSocketHandshake(const http::request_header<Fields>& req, bool has_body) {
  if (req.method() != http::verb::get || req.version() != 11 || has_body) return false;
  const auto upgrade = req.find(http::field::upgrade);
  if (upgrade == req.end() || !HasToken(upgrade->value(), "websocket")) return false;
  for (auto it = req.find(http::field::connection);
       it != req.end() && it->name() == http::field::connection; ++it) {
    if (HasToken(it->value(), "upgrade")) return true;
  }
  return false;
}

std::string WebSocketAccept(std::string_view key) {
  std::string input(key);
  input.append(kGuid);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_size = 0;
  EVP_Digest(input.data(), input.size(), digest, &digest_size, EVP_sha1(), nullptr);
  std::string out(4 * ((digest_size + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), digest,
                                static_cast<int>(digest_size));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

bool AcceptsHandshake(const http::response_header<Fields>& res, std::string_view key) {
  const auto accept = res.find(http::field::sec_websocket_accept);
  if (accept == res.end() || key.empty()) return false;
  std::string_view value = accept->value();
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  return value == WebSocketAccept(key);
}

Task<TunnelResult> RunTunnel(AnyStream& client, beast::flat_buffer& client_buffer,
                             AnyStream& upstream, beast::flat_buffer& upstream_buffer, char* down,
                             const TunnelOptions& options) {
  using namespace asio::experimental::awaitable_operators;
  const OpenGauge gauge(options.metrics, options.route_metric);
  const auto up = std::make_unique<char[]>(kRelayChunk);
  Tunnel t(client, upstream, options);
  co_await (Pump(t, client, client_buffer, upstream, up.get(), true) &&
            Pump(t, upstream, upstream_buffer, client, down, false) && Watch(t));
  co_return t.result;
}

}  // namespace tollgate::gateway
