#include "gateway/core/response_filter.h"

#include "gateway/core/admission.h"
#include "gateway/core/http_util.h"
#include "gateway/core/respond.h"
#include "gateway/core/gateway_state.h"
#include "rules/config.h"

namespace tollgate::gateway {
namespace {

class HeadFields final : public ResponseFields {
 public:
  explicit HeadFields(const http::response_header<Fields>& res) : res_(res) {}
  std::string_view Get(std::string_view name) const override {
    const auto it = res_.find(beast::string_view(name.data(), name.size()));
    return it == res_.end() ? std::string_view() : std::string_view(it->value());
  }

 private:
  const http::response_header<Fields>& res_;
};

}  // namespace

void ResponseFilter::Head(const GatewayState& state, Admission* admission,
                          const rules::UpstreamConfig& upstream, UpstreamProtocol protocol,
                          http::response_header<Fields>& res, std::string& lines,
                          ResponseKind kind) const {
  // Learnt from before the hop-by-hop fields go: they are the upstream's
  // words as it said them.
  if (upstream.learn_limits && kind == ResponseKind::kResponse && admission != nullptr) {
    admission->Learn(state, upstream, res.result_int(), res);
  }
  ex_.status = res.result_int();
  if (ex_.body_observer != nullptr && kind == ResponseKind::kResponse) {
    ex_.body_observer->OnResponseHead(res.result_int(), HeadFields(res));
  }
  if (protocol == UpstreamProtocol::kHttp1) RemoveHopByHop(res);
  if (kind == ResponseKind::kWebSocketUpgrade) {
    // Hop-by-hop, but the handshake's answer goes on with them.
    res.set(http::field::upgrade, "websocket");
    res.set(http::field::connection, "Upgrade");
  }
  if (state.config->server.via) {
    res.set(http::field::via, protocol == UpstreamProtocol::kHttp1 ? "1.1 tollgate" : "2 tollgate");
  }
  lines.clear();
  if (ex_.limits.shown != nullptr) {
    AppendRateLimitHeaders(*ex_.limits.shown, ex_.limits.shown_decision, lines);
  }
}

}  // namespace tollgate::gateway
