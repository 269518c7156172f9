// WebSocket (RFC 6455) through the gateway: recognising a handshake,
// checking the upstream's answer to it, and the two-way byte tunnel that a
// connection becomes after `101 Switching Protocols`. The tunnel does not
// parse frames: it relays bytes, so text, binary, fragmented messages, pings
// and the close handshake pass as the peers wrote them.
// Heavy (Asio/Beast): include only from gateway implementation files.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "gateway/io/net.h"

namespace tollgate::gateway {

class ThreadMetrics;

// A WebSocket opening handshake: GET, HTTP/1.1, a Connection field with
// the token "upgrade" and an Upgrade field with the token "websocket"
// (case-insensitive, as RFC 6455 §4.2.1 says). The request has no body.
bool IsWebSocketHandshake(const http::request_header<Fields>& req, bool has_body);

// Sec-WebSocket-Accept for a client's Sec-WebSocket-Key: base64 of the
// SHA-1 of the key followed by the RFC's GUID (RFC 6455 §4.2.2).
std::string WebSocketAccept(std::string_view key);

// The upstream's 101 may open the tunnel: its Sec-WebSocket-Accept is the
// one `key` calls for.
bool AcceptsHandshake(const http::response_header<Fields>& res, std::string_view key);

struct TunnelOptions {
  // The tunnel closes when no byte went either way for this long (and a
  // write that cannot finish within it ends the tunnel too).
  std::chrono::milliseconds idle{300'000};
  ThreadMetrics* metrics = nullptr;  // null: metrics are off
  int route_metric = 0;              // label id of the route
};

struct TunnelResult {
  std::uint64_t bytes_in = 0;   // client to upstream
  std::uint64_t bytes_out = 0;  // upstream to client
  bool idle_timeout = false;    // closed by TunnelOptions::idle
};

// Relays bytes both ways between `client` and `upstream` until either side
// ends its stream, fails, or the tunnel idles out. What the buffers already
// hold (read past the handshake request and past the 101 response) goes
// first. Each direction reads only once its last write completed (a slow
// reader holds back its writer), through its own kRelayChunk buffer:
// `down` (upstream to client) is given, the other is the tunnel's own.
// Reads have no deadline; the idle watchdog ends the tunnel, which cancels
// both streams' pending operations. The streams are left open (the caller
// shuts them down and closes them).
Task<TunnelResult> RunTunnel(AnyStream& client, beast::flat_buffer& client_buffer,
                             AnyStream& upstream, beast::flat_buffer& upstream_buffer, char* down,
                             const TunnelOptions& options);

}  // namespace tollgate::gateway
