#include "gateway/admin/admin.h"

#include <fmt/format.h>

#include "gateway/core/http_util.h"
#include "gateway/io/linger.h"
#include "gateway/admin/admin_api.h"
#include "gateway/admin/status_page.h"

namespace tollgate::gateway {
namespace {

constexpr auto kAdminTimeout = std::chrono::seconds(10);
constexpr std::uint32_t kAdminHeaderLimit = 8 * 1024;
constexpr std::uint64_t kAdminBodyLimit = 64 * 1024;
constexpr std::chrono::seconds kAdminLinger{5};
constexpr std::size_t kAdminLingerBytes = std::size_t{1} << 20;

http::response<http::string_body> Response(http::status status, std::string_view content_type,
                                           std::string body) {
  http::response<http::string_body> res{status, 11};
  res.set(http::field::server, "tollgate");
  res.set(http::field::content_type, content_type);
  res.set(http::field::cache_control, "no-store");
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

http::response<http::string_body> JsonResponse(http::status status, std::string body) {
  return Response(status, "application/json", std::move(body));
}

}  // namespace

AdminServer::AdminServer(asio::io_context& io, Acceptor acceptor, Handlers handlers)
    : io_(io),
      acceptor_(std::move(acceptor)),
      handlers_(std::move(handlers)),
      sample_timer_(io.get_executor()) {}

void AdminServer::Start() {
  asio::co_spawn(io_, AcceptLoop(), asio::detached);
  if (handlers_.sample) asio::co_spawn(io_, SampleLoop(), asio::detached);
}

void AdminServer::Stop() {
  stopped_ = true;
  ErrorCode ec;
  acceptor_.close(ec);
  sample_timer_.cancel();
}

Task<void> AdminServer::SampleLoop() {
  // A fixed schedule, so that samples stay one interval apart however long
  // each one takes.
  auto next = Timer::clock_type::now();
  while (!stopped_) {
    handlers_.sample();
    next += kSampleInterval;
    sample_timer_.expires_at(next);
    co_await sample_timer_.async_wait(kUseTuple);
  }
}

Task<void> AdminServer::AcceptLoop() {
  while (!stopped_) {
    auto [ec, socket] = co_await acceptor_.async_accept(kUseTuple);
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) co_return;
      continue;
    }
    asio::co_spawn(io_, Serve(TcpStream(std::move(socket))), asio::detached);
  }
}

Task<void> AdminServer::Serve(TcpStream stream) {
  beast::flat_buffer buffer;
  ErrorCode peer_ec;
  const tcp::endpoint peer_endpoint = stream.socket().remote_endpoint(peer_ec);
  const std::string peer =
      peer_ec ? std::string("unknown")
              : fmt::format("{}:{}", peer_endpoint.address().to_string(), peer_endpoint.port());
  // After an answer to a request not read to its end: what the peer still
  // sends is read and dropped, so that the answer is not lost to a reset.
  bool linger = false;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(kAdminHeaderLimit);
    parser.body_limit(kAdminBodyLimit);
    stream.expires_after(kAdminTimeout);
    auto [ec, n] = co_await http::async_read(stream, buffer, parser, kUseTuple);
    if (ec == http::error::body_limit || ec == http::error::header_limit) {
      // The rest of the request is not read: answer, then close.
      http::response<http::string_body> res =
          ec == http::error::body_limit
              ? MakeErrorResponse(
                    http::status::payload_too_large, "body_too_large",
                    fmt::format("admin request bodies are at most {} bytes", kAdminBodyLimit))
              : MakeErrorResponse(
                    http::status::request_header_fields_too_large, "header_too_large",
                    fmt::format("admin request headers are at most {} bytes", kAdminHeaderLimit));
      res.keep_alive(false);
      auto [wec, wn] = co_await http::async_write(stream, res, kUseTuple);
      linger = !wec;
      break;
    }
    if (ec) break;
    const std::string_view target = parser.get().target();
    http::response<http::string_body> res;
    // (GCC 12 miscompiles co_await inside ?: : keep it a statement.)
    if (handlers_.api && target.starts_with(AdminApi::kPrefix)) {
      res = co_await handlers_.api(parser.get(), peer);
    } else {
      res = Handle(parser.get());
    }
    res.keep_alive(parser.get().keep_alive() && !stopped_);
    auto [wec, wn] = co_await http::async_write(stream, res, kUseTuple);
    if (wec || !res.keep_alive()) break;
  }
  ErrorCode ec;
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  if (linger && !ec) co_await Linger(stream, kAdminLinger, kAdminLingerBytes);
}

http::response<http::string_body> AdminServer::Handle(const http::request<http::string_body>& req) {
  const std::string_view path = req.target().substr(0, req.target().find('?'));
  if (req.method() != http::verb::get && req.method() != http::verb::head) {
    return MakeErrorResponse(http::status::method_not_allowed, "method_not_allowed",
                             "the admin endpoints answer GET");
  }
  if (path == "/healthz") return JsonResponse(http::status::ok, "{\"status\":\"ok\"}\n");
  if (path == "/readyz") {
    const Readiness r = handlers_.ready();
    const bool ready = !stopped_ && r.ready;
    return JsonResponse(ready ? http::status::ok : http::status::service_unavailable,
                        fmt::format("{{\"status\":\"{}\",\"store\":{}}}\n",
                                    ready ? "ready" : "not_ready", r.store_json));
  }
  if (path == "/metrics" && handlers_.metrics) {
    return Response(http::status::ok, "text/plain; version=0.0.4; charset=utf-8",
                    handlers_.metrics());
  }
  if (path == "/status.json" && handlers_.status) {
    return JsonResponse(http::status::ok, handlers_.status());
  }
  if (path == "/" && handlers_.status) {
    auto res = Response(http::status::ok, "text/html; charset=utf-8", std::string(kStatusPage));
    // The page is self-contained: nothing else may load into it.
    res.set("Content-Security-Policy",
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
            "connect-src 'self'");
    return res;
  }
  return MakeErrorResponse(http::status::not_found, "not_found", "no such admin endpoint");
}

}  // namespace tollgate::gateway
