#include "gateway/tools/echo_upstream.h"

#include <fmt/format.h>
#include <sys/socket.h>

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <charconv>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "gateway/io/listen.h"
#include "gateway/io/net.h"

namespace tollgate::gateway {
namespace {

constexpr std::size_t kChunk = 16 * 1024;

std::uint64_t Number(std::string_view text) {
  std::uint64_t n = 0;
  std::from_chars(text.data(), text.data() + text.size(), n);
  return n;
}

// The value of `name` in the query of `target`, as a number (0 if absent).
std::uint64_t QueryNumber(std::string_view target, std::string_view name) {
  const std::size_t q = target.find('?');
  if (q == std::string_view::npos) return 0;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    const std::string_view pair = query.substr(0, query.find('&'));
    if (pair.size() > name.size() && pair.substr(0, name.size()) == name &&
        pair[name.size()] == '=') {
      return Number(pair.substr(name.size() + 1));
    }
    query.remove_prefix(std::min(query.size(), pair.size() + 1));
  }
  return 0;
}

// A partner API with its own limits, for tests of learned limits: per
// bucket a fixed window on the real clock; shared by every connection.
class PartnerApi {
 public:
  struct Answer {
    bool allowed = true;
    std::uint64_t limit = 0, remaining = 0, reset_after_ms = 0;
    bool global = false;
  };
  // Windows are aligned on the steady clock, or on Unix time when
  // `unix_clock` (as Redis TIME is).
  Answer Take(const std::string& bucket, std::uint64_t limit, std::uint64_t window_ms,
              bool global_block, bool unix_clock) {
    const auto since_epoch = unix_clock ? std::chrono::system_clock::now().time_since_epoch()
                                        : std::chrono::steady_clock::now().time_since_epoch();
    const auto now = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch).count());
    std::lock_guard lock(mutex_);
    Bucket& b = buckets_[bucket];
    const std::uint64_t index = now / window_ms;
    if (b.window != index) {
      b.window = index;
      b.used = 0;
    }
    Answer a;
    a.limit = limit;
    a.reset_after_ms = (index + 1) * window_ms - now;
    if (global_until_ > now) {
      a.allowed = false;
      a.global = true;
      a.reset_after_ms = global_until_ - now;
    } else if (b.used < limit) {
      ++b.used;
      ++b.served;
      b.max_in_window = std::max(b.max_in_window, b.used);
    } else {
      a.allowed = false;
      a.global = global_block;
      if (global_block) global_until_ = (index + 1) * window_ms;
    }
    if (!a.allowed) ++b.refused;
    a.remaining = limit - std::min(limit, b.used);
    return a;
  }
  // Counts a request in flight; how many are, itself included.
  std::int64_t Enter() {
    std::lock_guard lock(mutex_);
    max_concurrent_ = std::max(max_concurrent_, ++concurrent_);
    return concurrent_;
  }
  void Leave() {
    std::lock_guard lock(mutex_);
    --concurrent_;
  }
  std::string Stats() {
    std::lock_guard lock(mutex_);
    boost::json::object out;
    for (const auto& [name, b] : buckets_) {
      out[name] = {
          {"served", b.served}, {"refused", b.refused}, {"max_in_window", b.max_in_window}};
    }
    out["_max_concurrent"] = max_concurrent_;
    return boost::json::serialize(out);
  }

 private:
  struct Bucket {
    std::uint64_t window = 0, used = 0, served = 0, refused = 0, max_in_window = 0;
  };
  std::mutex mutex_;
  std::map<std::string, Bucket> buckets_;
  std::uint64_t global_until_ = 0;
  std::int64_t concurrent_ = 0, max_concurrent_ = 0;
};

class Connection {
 public:
  Connection(TcpSocket socket, std::uint16_t port, PartnerApi& partner)
      : stream_(std::move(socket)), port_(port), partner_(partner) {}

  Task<void> Run() {
    for (;;) {
      http::request_parser<http::empty_body> head;
      head.body_limit(boost::none);
      head.header_limit(64 * 1024);
      stream_.expires_after(std::chrono::seconds(60));
      auto [ec, n] = co_await http::async_read_header(stream_, buffer_, head, kUseTuple);
      if (ec) break;
      ++requests_;
      const bool keep = co_await Respond(head);
      if (!keep) break;
    }
    ErrorCode ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

 private:
  template <typename Body>
  void Common(http::response<Body>& res, bool keep_alive) {
    res.set(http::field::server, "tollgate-echo");
    res.set("X-Upstream-Port", std::to_string(port_));
    res.set("X-Upstream-Request", std::to_string(requests_));
    res.keep_alive(keep_alive);
  }

  Task<bool> Respond(http::request_parser<http::empty_body>& head) {
    const std::string target(head.get().target());
    const std::string_view path = std::string_view(target).substr(0, target.find('?'));
    const bool chunked = target.find("chunked") != std::string::npos;
    const bool keep_alive = head.get().keep_alive();
    const bool head_request = head.get().method() == http::verb::head;
    if (path == "/_test/echo") co_return co_await Echo(head);
    http::response<http::string_body> res{http::status::ok, 11};
    Common(res, keep_alive);
    std::uint64_t received = 0;
    // A chunked body's trailers join the fields /_test/headers reports.
    http::fields seen;
    if (!co_await DiscardBody(head, received, path == "/_test/headers" ? &seen : nullptr)) {
      co_return false;
    }
    if (path == "/_test/headers") {
      boost::json::object fields;
      for (const auto& f : seen) {
        std::string name(f.name_string());
        auto it = fields.find(name);
        if (it == fields.end()) {
          fields[name] = f.value();
        } else {
          it->value() = std::string(it->value().as_string()) + "," + std::string(f.value());
        }
      }
      res.set(http::field::content_type, "application/json");
      res.body() = boost::json::serialize(fields);
    }
    if (path == "/_test/count") res.body() = std::to_string(received) + "\n";
    if (path.rfind("/_test/bytes/", 0) == 0) {
      co_return co_await Bytes(keep_alive, Number(path.substr(13)), chunked);
    }
    if (path == "/_test/trailers") co_return co_await Trailers(keep_alive);
    if (path.rfind("/_test/drip/", 0) == 0) {
      co_return co_await Drip(keep_alive, Number(path.substr(12)),
                              std::max<std::uint64_t>(1, QueryNumber(target, "every")));
    }
    res.set(http::field::content_type, "text/plain");
    bool keep = res.keep_alive();
    if (path.rfind("/_test/status/", 0) == 0) {
      res.result(static_cast<unsigned>(Number(path.substr(14))));
      res.body() = "status\n";
    } else if (path.rfind("/_test/sleep/", 0) == 0 || path.rfind("/_test/knee/", 0) == 0) {
      const bool knee = path[7] == 'k';
      const std::int64_t in_flight = partner_.Enter();
      std::uint64_t ms = Number(path.substr(knee ? 12 : 13));
      if (knee) {
        // C workers: beyond them, each request's share of them shrinks.
        const auto capacity =
            static_cast<std::int64_t>(std::max<std::uint64_t>(1, QueryNumber(target, "capacity")));
        ms = ms * static_cast<std::uint64_t>(std::max(in_flight, capacity)) /
             static_cast<std::uint64_t>(capacity);
      }
      asio::steady_timer timer(co_await asio::this_coro::executor, std::chrono::milliseconds(ms));
      co_await timer.async_wait(kUseTuple);
      partner_.Leave();
      res.body() = "slept\n";
    } else if (path.rfind("/_test/limited/", 0) == 0) {
      const std::uint64_t limit = std::max<std::uint64_t>(1, QueryNumber(target, "limit"));
      const std::uint64_t window = std::max<std::uint64_t>(1, QueryNumber(target, "window"));
      const PartnerApi::Answer a =
          partner_.Take(std::string(path.substr(15)), limit, window,
                        QueryNumber(target, "global") != 0, QueryNumber(target, "unix") != 0);
      res.set("X-RateLimit-Limit", std::to_string(a.limit));
      res.set("X-RateLimit-Remaining", std::to_string(a.remaining));
      res.set("X-RateLimit-Reset-After", fmt::format("{:.3f}", a.reset_after_ms / 1000.0));
      if (a.allowed) {
        res.body() = "partner ok\n";
      } else {
        res.result(http::status::too_many_requests);
        res.set(http::field::retry_after, std::to_string((a.reset_after_ms + 999) / 1000));
        if (a.global) res.set("X-RateLimit-Global", "true");
        res.body() = "partner limit\n";
      }
    } else if (path.rfind("/_test/usage/", 0) == 0) {
      // An LLM API's answer that used N tokens (bench/cost.sh settles by it).
      const std::uint64_t n = Number(path.substr(13));
      res.set(http::field::content_type, "application/json");
      res.body() = fmt::format(
          R"({{"object":"chat.completion","choices":[{{"index":0,"message":{{"role":"assistant",)"
          R"("content":"hi"}}}}],"usage":{{"prompt_tokens":{},"completion_tokens":{},)"
          R"("total_tokens":{}}}}})",
          n / 2, n - n / 2, n);
    } else if (path == "/_test/partner-stats") {
      res.set(http::field::content_type, "application/json");
      res.body() = partner_.Stats();
    } else if (path == "/_test/headers") {
      // The body was filled in before the request body was consumed.
    } else if (path == "/_test/close") {
      keep = false;
      res.keep_alive(false);
      res.body() = "bye\n";
    } else if (path != "/_test/count") {
      res.body() = "hello from upstream\n";
    }
    const unsigned status = res.result_int();
    if (status == 204 || status == 304 || status < 200) res.body().clear();
    res.prepare_payload();
    stream_.expires_after(std::chrono::seconds(60));
    if (head_request) {
      // The header announces the body's length; the body itself is not sent.
      http::response<http::empty_body> header_only{std::move(res.base())};
      auto [ec, n] = co_await http::async_write(stream_, header_only, kUseTuple);
      co_return !ec && keep;
    }
    auto [ec, n] = co_await http::async_write(stream_, res, kUseTuple);
    co_return !ec && keep;
  }

  // Reads the request's body and drops it; `fields`, when given, gets the
  // request's header fields followed by a chunked body's trailers.
  Task<bool> DiscardBody(http::request_parser<http::empty_body>& head, std::uint64_t& received,
                         http::fields* fields = nullptr) {
    if (head.is_done()) {
      if (fields != nullptr) *fields = head.get().base();
      co_return true;
    }
    http::request_parser<http::buffer_body> body{std::move(head)};
    char scratch[kChunk];
    while (!body.is_done()) {
      body.get().body().data = scratch;
      body.get().body().size = sizeof(scratch);
      stream_.expires_after(std::chrono::seconds(60));
      auto [ec, n] = co_await http::async_read_some(stream_, buffer_, body, kUseTuple);
      if (ec && ec != http::error::need_buffer) co_return false;
      received += sizeof(scratch) - body.get().body().size;
    }
    if (fields != nullptr) *fields = body.get().base();
    co_return true;
  }

  Task<bool> Bytes(bool keep_alive, std::uint64_t total, bool chunked) {
    http::response<http::buffer_body> res{http::status::ok, 11};
    Common(res, keep_alive);
    res.set(http::field::content_type, "application/octet-stream");
    if (chunked) {
      res.chunked(true);
    } else {
      res.content_length(total);
    }
    std::vector<char> block(kChunk, 'x');
    res.body().data = nullptr;
    res.body().more = true;
    http::response_serializer<http::buffer_body> sr{res};
    auto [hec, hn] = co_await http::async_write_header(stream_, sr, kUseTuple);
    if (hec) co_return false;
    std::uint64_t sent = 0;
    while (sent < total) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, total - sent));
      res.body().data = block.data();
      res.body().size = n;
      res.body().more = sent + n < total;
      stream_.expires_after(std::chrono::seconds(60));
      auto [ec, wn] = co_await http::async_write(stream_, sr, kUseTuple);
      if (ec && ec != http::error::need_buffer) co_return false;
      sent += n;
    }
    if (!sr.is_done()) {
      res.body().data = nullptr;
      res.body().size = 0;
      res.body().more = false;
      auto [ec, wn] = co_await http::async_write(stream_, sr, kUseTuple);
      if (ec && ec != http::error::need_buffer) co_return false;
    }
    co_return res.keep_alive();
  }

  // "hello" in a chunked body whose last chunk carries gRPC-style trailers.
  Task<bool> Trailers(bool keep_alive) {
    std::string raw = "HTTP/1.1 200 OK\r\nServer: tollgate-echo\r\nX-Upstream-Port: " +
                      std::to_string(port_) +
                      "\r\nContent-Type: application/grpc\r\nTransfer-Encoding: chunked\r\n"
                      "Trailer: grpc-status, grpc-message\r\n";
    if (!keep_alive) raw += "Connection: close\r\n";
    raw += "\r\n5\r\nhello\r\n0\r\ngrpc-status: 0\r\ngrpc-message: ok\r\n\r\n";
    stream_.expires_after(std::chrono::seconds(60));
    auto [ec, n] = co_await asio::async_write(stream_, asio::buffer(raw), kUseTuple);
    co_return !ec && keep_alive;
  }

  // A chunked body of `total` bytes, one byte every `every_ms`.
  Task<bool> Drip(bool keep_alive, std::uint64_t total, std::uint64_t every_ms) {
    http::response<http::buffer_body> res{http::status::ok, 11};
    Common(res, keep_alive);
    res.set(http::field::content_type, "application/octet-stream");
    res.chunked(true);
    char byte = 'd';
    res.body().data = nullptr;
    res.body().more = true;
    http::response_serializer<http::buffer_body> sr{res};
    stream_.expires_after(std::chrono::seconds(60));
    auto [hec, hn] = co_await http::async_write_header(stream_, sr, kUseTuple);
    if (hec) co_return false;
    asio::steady_timer timer(co_await asio::this_coro::executor);
    for (std::uint64_t sent = 0; sent <= total; ++sent) {
      timer.expires_after(std::chrono::milliseconds(every_ms));
      co_await timer.async_wait(kUseTuple);
      res.body().data = sent < total ? &byte : nullptr;
      res.body().size = sent < total ? 1 : 0;
      res.body().more = sent < total;
      stream_.expires_after(std::chrono::seconds(60));
      auto [ec, wn] = co_await http::async_write(stream_, sr, kUseTuple);
      if (ec && ec != http::error::need_buffer) co_return false;
    }
    co_return res.keep_alive();
  }

  Task<bool> Echo(http::request_parser<http::empty_body>& head) {
    http::response<http::buffer_body> res{http::status::ok, 11};
    Common(res, head.get().keep_alive());
    res.set(http::field::content_type, "application/octet-stream");
    const bool keep = res.keep_alive();
    if (head.content_length()) {
      res.content_length(*head.content_length());
    } else {
      res.chunked(true);
    }
    http::request_parser<http::buffer_body> body{std::move(head)};
    res.body().data = nullptr;
    res.body().more = true;
    http::response_serializer<http::buffer_body> sr{res};
    auto [hec, hn] = co_await http::async_write_header(stream_, sr, kUseTuple);
    if (hec) co_return false;
    char scratch[kChunk];
    do {
      if (!body.is_done()) {
        body.get().body().data = scratch;
        body.get().body().size = sizeof(scratch);
        stream_.expires_after(std::chrono::seconds(60));
        auto [ec, n] = co_await http::async_read_some(stream_, buffer_, body, kUseTuple);
        if (ec && ec != http::error::need_buffer) co_return false;
        res.body().size = sizeof(scratch) - body.get().body().size;
        // Zero bytes with a buffer would be serialized as the last chunk.
        res.body().data = res.body().size > 0 ? scratch : nullptr;
        res.body().more = !body.is_done();
      } else {
        res.body().data = nullptr;
        res.body().size = 0;
        res.body().more = false;
      }
      auto [ec, n] = co_await http::async_write(stream_, sr, kUseTuple);
      if (ec && ec != http::error::need_buffer) co_return false;
    } while (!body.is_done() || !sr.is_done());
    co_return keep;
  }

  TcpStream stream_;
  beast::flat_buffer buffer_;
  std::uint16_t port_;
  PartnerApi& partner_;
  std::uint64_t requests_ = 0;  // on this connection
};

Task<void> RunConnection(std::unique_ptr<Connection> c) { co_await c->Run(); }

Task<void> AcceptLoop(Acceptor& acceptor, PartnerApi& partner) {
  const std::uint16_t port = acceptor.local_endpoint().port();
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(kUseTuple);
    if (ec) {
      if (!acceptor.is_open()) co_return;
      continue;
    }
    ErrorCode ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    asio::co_spawn(acceptor.get_executor(),
                   RunConnection(std::make_unique<Connection>(std::move(socket), port, partner)),
                   asio::detached);
  }
}

}  // namespace

struct EchoUpstream::Impl {
  PartnerApi partner;
  std::vector<std::unique_ptr<asio::io_context>> ios;
  std::vector<std::unique_ptr<Acceptor>> acceptors;
  std::vector<std::thread> threads;
};

EchoUpstream::EchoUpstream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EchoUpstream::~EchoUpstream() {
  Stop();
  Wait();
}

std::unique_ptr<EchoUpstream> EchoUpstream::Create(const std::string& host, std::uint16_t port,
                                                   int threads, std::string& error) {
  auto impl = std::make_unique<Impl>();
  ErrorCode ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) {
    error = "echo upstream: \"" + host + "\" is not an IP address";
    return nullptr;
  }
  tcp::endpoint endpoint(address, port);
  for (int i = 0; i < std::max(1, threads); ++i) {
    impl->ios.push_back(std::make_unique<asio::io_context>(1));
    auto acceptor = Listen(*impl->ios.back(), endpoint,
                           i == 0 ? Listening::kFirstOfThreads : Listening::kAnotherThread, error);
    if (!acceptor) {
      error = "echo upstream: " + error;
      return nullptr;
    }
    endpoint.port(acceptor->local_endpoint().port());
    impl->acceptors.push_back(std::move(acceptor));
  }
  return std::unique_ptr<EchoUpstream>(new EchoUpstream(std::move(impl)));
}

void EchoUpstream::Start() {
  for (std::size_t i = 0; i < impl_->ios.size(); ++i) {
    asio::co_spawn(*impl_->ios[i], AcceptLoop(*impl_->acceptors[i], impl_->partner),
                   asio::detached);
    impl_->threads.emplace_back([io = impl_->ios[i].get()] { io->run(); });
  }
}

void EchoUpstream::Stop() {
  for (auto& io : impl_->ios) io->stop();
}

void EchoUpstream::Wait() {
  for (auto& t : impl_->threads) {
    if (t.joinable()) t.join();
  }
}

std::uint16_t EchoUpstream::port() const {
  return impl_->acceptors.front()->local_endpoint().port();
}

}  // namespace tollgate::gateway
