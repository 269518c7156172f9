#include "gateway/tools/ctl_client.h"

#include "gateway/io/io_types.h"

namespace tollgate::gateway {
namespace {

using Stream = beast::basic_stream<tcp, Executor>;

Task<void> Exchange(const AdminCall& call, AdminReply& reply) {
  const Executor executor = co_await asio::this_coro::executor;
  asio::ip::basic_resolver<tcp, Executor> resolver(executor);
  Stream stream(executor);
  stream.expires_after(kAdminCallTimeout);
  // The stream's deadline covers connecting, writing and reading; this
  // timer covers the name's resolution.
  Timer resolving(executor, kAdminCallTimeout);
  resolving.async_wait([&resolver](const ErrorCode& ec) {
    if (!ec) resolver.cancel();
  });
  auto [rec, endpoints] =
      co_await resolver.async_resolve(call.host, std::to_string(call.port), kUseTuple);
  resolving.cancel();
  if (rec) {
    reply.error = "cannot resolve " + call.host + ": " + rec.message();
    co_return;
  }
  auto [cec, endpoint] = co_await stream.async_connect(endpoints, kUseTuple);
  if (cec) {
    reply.error = "cannot connect to " + call.host + ":" + std::to_string(call.port) + ": " +
                  cec.message();
    co_return;
  }
  http::request<http::string_body> req{http::string_to_verb(call.method), call.target, 11};
  req.set(http::field::host, call.host);
  req.set(http::field::user_agent, "tollgate-ctl");
  if (!call.token.empty()) req.set(http::field::authorization, "Bearer " + call.token);
  if (!call.body.empty()) req.set(http::field::content_type, "application/json");
  req.body() = call.body;
  req.prepare_payload();
  req.keep_alive(false);
  auto [wec, wn] = co_await http::async_write(stream, req, kUseTuple);
  if (wec) {
    reply.error = "cannot send the request: " + wec.message();
    co_return;
  }
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  auto [ec, n] = co_await http::async_read(stream, buffer, res, kUseTuple);
  if (ec) {
    reply.error = "no answer: " + ec.message();
    co_return;
  }
  reply.status = res.result_int();
  reply.body = std::move(res.body());
}

}  // namespace

AdminReply CallAdmin(const AdminCall& call) {
  asio::io_context io;
  AdminReply reply;
  asio::co_spawn(io, Exchange(call, reply), asio::detached);
  io.run();
  return reply;
}

}  // namespace tollgate::gateway
