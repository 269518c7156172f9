// Phase respond, for a response that comes from the upstream: the one place
// that decides what tollgate does to it before the client sees it. Its head
// teaches the upstream's learned limits (learn_limits), loses the hop-by-hop
// fields of an HTTP/1.1 upstream, gains Via and the RateLimit fields of the
// rule shown to the client; its head, body and trailers pass by a
// ResponseBodyObserver (gateway/core/response_observer.h) when the
// exchange has one. What stays with each
// client protocol is framing (HTTP/1.1's version, length or chunks and
// Connection; HTTP/2's frames). Heavy (Beast): gateway implementation files
// only. Worker thread only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "gateway/core/adaptive_upstream.h"
#include "gateway/core/exchange.h"
#include "gateway/core/response_observer.h"
#include "gateway/io/net.h"

namespace tollgate::rules {
struct UpstreamConfig;
}  // namespace tollgate::rules

namespace tollgate::gateway {

class Admission;
struct GatewayState;

// The protocol the upstream answered in: Via's received-protocol, and
// whether its fields can hold hop-by-hop ones (HTTP/2 has none: nghttp2
// refuses them).
enum class UpstreamProtocol : std::uint8_t { kHttp1, kHttp2 };

// What the response is: an ordinary one, or an HTTP/1.1 upstream's 101 to
// a WebSocket handshake (not learnt from; Upgrade and Connection go on).
enum class ResponseKind : std::uint8_t { kResponse, kWebSocketUpgrade };

// One exchange's filter: made where the response arrives, as cheap to keep
// as a reference (coroutine frames hold it while the body is relayed).
class ResponseFilter {
 public:
  explicit ResponseFilter(Exchange& ex) : ex_(ex) {}

  // The response head from `upstream`, decorated in place: learned from
  // (`admission`, the exchange's, when the upstream has learn_limits; it
  // may be null for an upstream without), its status noted in the
  // exchange, hop-by-hop fields removed (HTTP/1.1 upstream), Via set
  // ([server] via of state.config). The RateLimit fields of the rule shown
  // to the client go to `lines` ("Name: value\r\n", cleared first): an
  // HTTP/1.1 client gets them appended to the serialized head, an HTTP/2
  // one as fields (AddHeaderLines).
  void Head(const GatewayState& state, Admission* admission, const rules::UpstreamConfig& upstream,
            UpstreamProtocol protocol, http::response_header<Fields>& res, std::string& lines,
            ResponseKind kind = ResponseKind::kResponse) const;

  // A piece of the body, as the client gets it.
  void Body(std::string_view piece) const {
    if (ex_.body_observer != nullptr) ex_.body_observer->OnResponseBody(piece);
  }
  void Body(const char* data, std::size_t size) const { Body(std::string_view(data, size)); }
  // The upstream's body (empty or not) has ended complete, with its
  // trailers (passed on unchanged), and is on its way to the client; an
  // adaptive upstream takes its sample.
  void End() const {
    if (ex_.body_observer != nullptr) ex_.body_observer->OnResponseEnd();
    if (ex_.adaptive != nullptr) EndAnsweredExchange(ex_);
  }

 private:
  Exchange& ex_;
};

}  // namespace tollgate::gateway
