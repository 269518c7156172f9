#include "gateway/http2/upstream_connection.h"

#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "base/loop_time.h"
#include "gateway/http2/header_list.h"
#include "gateway/http2/upstream_link.h"

namespace tollgate::gateway {

using Clock = std::chrono::steady_clock;

namespace {

// The first send and one retry (RFC 9113 §8.7).
constexpr int kMaxAttempts = 2;

bool NegotiatedH2(AnyStream& stream) {
  auto* tls = std::get_if<TlsStream>(&stream);
  if (tls == nullptr) return false;
  const unsigned char* alpn = nullptr;
  unsigned int alpn_len = 0;
  SSL_get0_alpn_selected(tls->native_handle(), &alpn, &alpn_len);
  return std::string_view(reinterpret_cast<const char*>(alpn), alpn_len) == "h2";
}

}  // namespace

using http2_upstream_detail::Link;
using http2_upstream_detail::StreamState;

// An open waiting for a free stream: queued while it waits, woken by
// Wake() (or its deadline).
struct Http2UpstreamConnection::Waiter {
  Waiter(Http2UpstreamConnection& owner, const Executor& executor, Clock::time_point deadline)
      : session(owner), timer(executor, deadline) {
    session.waiters_.push_back(this);
  }
  ~Waiter() {
    if (woken) return;
    auto& queue = session.waiters_;
    queue.erase(std::remove(queue.begin(), queue.end(), this), queue.end());
  }
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;

  Http2UpstreamConnection& session;
  Timer timer;
  bool woken = false;
};

Http2UpstreamConnection::Http2UpstreamConnection(UpstreamPool& connector, std::size_t server,
                                           Http2Transport transport,
                                           const Http2UpstreamOptions& options,
                                           Http2UpstreamStats& stats)
    : connector_(connector),
      server_(server),
      transport_(transport),
      options_(options),
      stats_(stats) {}

Http2UpstreamConnection::~Http2UpstreamConnection() {
  const auto connections = std::move(connections_);
  for (const auto& c : connections) {
    c->Orphan();
    c->Close();
  }
}

namespace {

// The request header as HTTP/2 fields (RFC 9113 §8.3.1).
void BuildRequest(const http::request_header<Fields>& head, Http2Transport transport,
                  std::string_view server, http2_detail::HeaderList& list) {
  list.Add(":method", head.method_string());
  list.Add(":scheme", transport == Http2Transport::kTls ? "https" : "http");
  const std::string_view host = head[http::field::host];
  list.Add(":authority", host.empty() ? server : host);
  list.Add(":path", head.target().empty() ? std::string_view("/") : std::string_view(head.target()));
  // Trailers are relayed to every client (in the last chunk for HTTP/1.1),
  // and gRPC servers refuse a call without this (nginx's grpc_pass sends
  // it on every request too). The client's own TE was hop-by-hop.
  list.Add("te", "trailers");
  for (const auto& field : head) {
    const std::string_view name = field.name_string();
    if (http2_detail::ConnectionSpecific(name) || http2_detail::IEquals(name, "host")) continue;
    list.Add(name, field.value());
  }
}

}  // namespace

Task<Http2OpenResult> Http2UpstreamConnection::Open(const http::request_header<Fields>& head,
                                                 Http2Body body,
                                                 std::chrono::steady_clock::duration connect_timeout) {
  Http2OpenResult result;
  result.server = server_name();
  if (head.method() == http::verb::connect) {
    result.failure = ConnectFailure::kRefused;
    co_return result;
  }
  const auto deadline = store::LoopNow() + connect_timeout;
  const Executor executor = co_await asio::this_coro::executor;
  auto state = std::make_unique<StreamState>(*this, executor);
  BuildRequest(head, transport_, server_name(), state->request);
  state->has_body = body == Http2Body::kFollows;
  result.failure = co_await Attach(*state, deadline);
  if (result.failure == ConnectFailure::kNone) {
    result.stream = Http2UpstreamStream(std::move(state));
  }
  co_return result;
}

Link* Http2UpstreamConnection::WithRoom() const {
  // The oldest first: streams gather on as few connections as they can.
  for (const auto& c : connections_) {
    if (c->Room() > 0) return c.get();
  }
  return nullptr;
}

std::size_t Http2UpstreamConnection::Accepting() const {
  return static_cast<std::size_t>(std::count_if(
      connections_.begin(), connections_.end(), [](const auto& c) { return c->TakesStreams(); }));
}

Task<ConnectFailure> Http2UpstreamConnection::Attach(StreamState& s, Clock::time_point deadline) {
  bool counted_wait = false;
  for (;;) {
    if (Link* c = WithRoom()) {
      if (c->Submit(s)) {
        ++s.attempts;
        ++stats_.streams;
        co_return ConnectFailure::kNone;
      }
      continue;  // that connection takes no more streams now
    }
    if (connecting_ == 0 && Accepting() < options_.max_connections_per_server) {
      const ConnectFailure failure = co_await Connect(deadline);
      if (failure != ConnectFailure::kNone) co_return failure;
      continue;
    }
    if (store::LoopNow() >= deadline) co_return ConnectFailure::kTimeout;
    if (waiters_.size() >= options_.max_waiting_opens) co_return ConnectFailure::kRefused;
    if (!counted_wait) {
      counted_wait = true;
      ++stats_.waits;
    }
    const std::uint64_t failures = connect_failures_;
    const Executor executor = co_await asio::this_coro::executor;
    Waiter waiter(*this, executor, deadline);
    co_await waiter.timer.async_wait(kUseTuple);
    // The connection it waited for could not be made.
    if (connect_failures_ != failures && WithRoom() == nullptr) co_return last_failure_;
  }
}

Task<bool> Http2UpstreamConnection::Retry(StreamState& s, Clock::time_point deadline) {
  // Refused once more, or its body is no longer all here: it stays failed.
  if (s.attempts >= kMaxAttempts || !s.replayable || s.local_reset) {
    s.refused = false;
    co_return false;
  }
  s.Rewind();
  ++stats_.retries;
  const ConnectFailure failure = co_await Attach(s, deadline);
  if (failure != ConnectFailure::kNone) {
    s.closed = true;
    s.lost = true;
    co_return false;
  }
  co_return true;
}

Task<ConnectFailure> Http2UpstreamConnection::Connect(Clock::time_point deadline) {
  ++connecting_;
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - store::LoopNow());
  // (GCC 12 destroys temporaries twice when a ?: sits in a co_await
  // expression.)
  const Alpn alpn = transport_ == Http2Transport::kTls ? Alpn::kH2 : Alpn::kNone;
  ConnectResult cr =
      co_await connector_.Connect(server_, std::max<std::int64_t>(1, left.count()), alpn);
  ConnectFailure failure = cr.failure;
  std::shared_ptr<Link> c;
  if (cr.connection) {
    if (transport_ == Http2Transport::kTls && !NegotiatedH2(cr.connection->stream)) {
      spdlog::warn("upstream \"{}\" ({}) did not agree to HTTP/2 (ALPN h2)", connector_.name(),
                   server_name());
      connector_.MarkDown(server_);
      failure = ConnectFailure::kRefused;
    } else {
      c = std::make_shared<Link>(std::move(cr.connection->stream), options_, this);
      failure = co_await c->Handshake(deadline);
      if (failure != ConnectFailure::kNone) connector_.MarkDown(server_);
    }
  }
  --connecting_;
  if (failure != ConnectFailure::kNone) {
    ++connect_failures_;
    last_failure_ = failure;
    Wake(waiters_.size());
    co_return failure;
  }
  connections_.push_back(c);
  ++stats_.connections;
  // The caller takes one of its streams and as many waiters the others;
  // one more finds none left and opens the next connection (below the
  // cap) rather than wait for a stream to end.
  Wake(c->Room());
  co_return ConnectFailure::kNone;
}

void Http2UpstreamConnection::Wake(std::size_t n) {
  for (; n > 0 && !waiters_.empty(); --n) {
    Waiter* waiter = waiters_.front();
    waiters_.pop_front();
    waiter->woken = true;
    waiter->timer.cancel();
  }
}

void Http2UpstreamConnection::OnGoaway() {
  ++stats_.goaways;
  // Its streams go elsewhere now: a waiter may open a connection.
  Wake(1);
}

void Http2UpstreamConnection::OnConnectionEnd(Link* connection) {
  std::erase_if(connections_, [connection](const auto& c) { return c.get() == connection; });
  Wake(1);
}

}  // namespace tollgate::gateway
