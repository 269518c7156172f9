// WebSocket (RFC 6455) through the gateway: recognising a handshake,
// checking the upstream's answer to it, and the two-way tunnel that a
// connection becomes after `101 Switching Protocols`. Frames pass as the
// peers wrote them (text, binary, fragmented messages, pings, the close
// handshake). A tunnel without message-rate rules relays bytes and never
// looks at them; one with such rules follows the frames both ways
// (websocket_frames.h), checks the client's and decides each of its data
// messages before it goes on.
// Heavy (Asio/Beast): include only from gateway implementation files.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "gateway/http1/websocket_frames.h"
#include "gateway/io/net.h"
#include "rules/rule_set.h"

namespace tollgate::store {
class Store;
}  // namespace tollgate::store

namespace tollgate::gateway {

class ThreadMetrics;
struct GatewayState;

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

// What the upstream's 101 agreed to: with permessage-deflate (RFC 7692) in
// its Sec-WebSocket-Extensions, a client's data message may set RSV1.
Compression NegotiatedCompression(const http::response_header<Fields>& res);

// The per = "message" rules of a tunnel: each data message from the client
// is decided by all of them before its first byte goes on. A limited one
// ends the tunnel with close 1008 "rate_limited" (action = "reject"), or
// waits, the client unread meanwhile, until the rules allow it (action =
// "delay"; 1008 when that would take longer than the rule's max_delay);
// leaky_bucket shaping holds it its delay. When the store cannot decide
// and on_error = "deny": close 1013 "store_unavailable". A message above
// [limits] max_websocket_message_bytes ends the tunnel with 1009, a
// protocol error of the client's with 1002. Decisions are counted in
// tollgate_ratelimit_decisions_total like a request's.
struct MessageLimits {
  // The rules and their keys, as the handshake's evaluation found them
  // (rules::Evaluation::messages); they outlive the tunnel. Empty: the
  // tunnel is a byte relay and the fields below are not read.
  std::span<const rules::RuleHit> hits;
  // The configuration the handshake was served under: clock, [limits],
  // [store], the rules' metric ids. Outlives the tunnel.
  const GatewayState* state = nullptr;
  store::Store* store = nullptr;  // the worker's
  Compression compression = Compression::kNone;
};

struct TunnelOptions {
  // The tunnel closes when no byte went either way for this long (and a
  // write that cannot finish within it ends the tunnel too). A message held
  // by a delay rule is no idleness.
  std::chrono::milliseconds idle{300'000};
  ThreadMetrics* metrics = nullptr;  // null: metrics are off
  int route_metric = 0;              // label id of the route
  MessageLimits messages;
};

struct TunnelResult {
  std::uint64_t bytes_in = 0;   // client to upstream (tollgate's own close frames not counted)
  std::uint64_t bytes_out = 0;  // upstream to client
  // Why tollgate ended the tunnel, for the access log: "websocket_idle"
  // (TunnelOptions::idle), "websocket_rate_limited" (1008),
  // "websocket_too_big" (1009), "websocket_protocol_error" (1002),
  // "websocket_store_unavailable" (1013). Empty when a peer ended it.
  std::string_view error;
};

// Relays bytes both ways between `client` and `upstream` until either side
// ends its stream, fails, the tunnel idles out, or (with message limits)
// tollgate closes it. What the buffers already hold (read past the
// handshake request and past the 101 response) goes first (without
// message rules, the buffers are then given back). Each direction reads only once its last
// write completed (a slow reader holds back its writer), through a
// kRelayChunk buffer of its own, which a tunnel without message rules
// holds only while bytes pass. Reads have no deadline; the idle watchdog
// ends the tunnel, which cancels both streams' pending operations.
//
// When tollgate closes a tunnel, the upstream gets a masked close frame
// with the same code and reason (its answer is not awaited), and the client
// an unmasked one as soon as what goes to it has reached the end of a frame
// (the frame under way finishes first); then tollgate ends its side of the
// client's connection and drops what the client still sends until it
// closes too, for at most a second. The streams are left open otherwise
// (the caller shuts them down and closes them).
Task<TunnelResult> RunTunnel(AnyStream& client, beast::flat_buffer& client_buffer,
                             AnyStream& upstream, beast::flat_buffer& upstream_buffer,
                             const TunnelOptions& options);

}  // namespace tollgate::gateway
