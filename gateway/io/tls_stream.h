// TlsStream: TLS over a DeadlineStream, for client connections (server
// side) and upstream connections (client side), with the interface that
// Asio's ssl::stream gives the rest of the gateway (async_handshake,
// async_read_some, async_write_some, async_shutdown, native_handle,
// next_layer) and the deadlines of the DeadlineStream underneath.
//
// Why not asio::ssl::stream: its engine puts a BIO pair between the SSL
// object and the socket, so every record is copied twice more (into Asio's
// buffer, then into the pair), two 17 KiB buffers are zero-filled per
// connection, and every read and write runs the engine's state machine
// around OpenSSL's call, about twice what nginx spends beside SSL_read and
// SSL_write per kept-alive HTTPS request (docs/performance.md). Here the
// SSL object's BIO receives from the socket itself (into OpenSSL's own
// read-ahead buffer, as nginx's socket BIO does) and writes into one output
// buffer that the stream sends: the handshake's flight, the session tickets
// with the response that follows them, a last response with the
// close_notify, each leave in one send.
//
// How: each step (the SSL call, then sending its output) runs as the
// "perform" of an Asio reactor operation of the socket, as Asio's own
// receive and send do (tls_stream_detail.h): tried at once, and when
// the socket has nothing to give or no room, queued until epoll says it
// has, without another system call. A receive that leaves the socket empty
// (TCP_INQ, as DrainingRead: draining_read.h) tells the reactor so, and the
// next read waits for epoll at once instead of trying a recv() that fails.
// This relies on Asio's epoll reactor internals, as draining_read.h does,
// and builds only with the Boost this project uses (Debian 12's 1.81).
//
// Operations: at most one read and one write pending at a time (they may
// overlap, as HTTP/2's reader and writer do); a handshake or a shutdown
// alone. The stream must outlive its pending operations (as
// asio::ssl::stream). Errors as Asio's stream reports them:
// asio::error::eof after the peer's close_notify,
// ssl::error::stream_truncated for an end of stream without one, OpenSSL's
// error in asio::error::get_ssl_category(), and the DeadlineStream's
// timeout. Single-threaded, as DeadlineStream.
#pragma once

#include <openssl/ssl.h>

#include <boost/asio/buffer.hpp>
#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "gateway/io/deadline_stream.h"
#include "gateway/io/tls_stream_detail.h"

namespace tollgate::gateway {

// OpenSSL's SSL_free_buffers leaves a partly received record alone
// (CVE-2024-4741 fixed).
inline constexpr bool kFreeBuffersIsSafe =
    (OPENSSL_VERSION_NUMBER >= 0x300000e0L && OPENSSL_VERSION_NUMBER < 0x30100000L) ||
    (OPENSSL_VERSION_NUMBER >= 0x30100060L && OPENSSL_VERSION_NUMBER < 0x30200000L) ||
    (OPENSSL_VERSION_NUMBER >= 0x30200020L && OPENSSL_VERSION_NUMBER < 0x30300000L) ||
    OPENSSL_VERSION_NUMBER >= 0x30300010L;

class TlsStream {
 public:
  using executor_type = Executor;
  using next_layer_type = DeadlineStream;

  TlsStream(TcpSocket socket, ssl::context& context)
      : TlsStream(DeadlineStream(std::move(socket)), context) {}
  TlsStream(DeadlineStream next, ssl::context& context)
      : core_(std::make_unique<tls_detail::Core>(std::move(next), context.native_handle())) {}

  Executor get_executor() noexcept { return core_->next().get_executor(); }
  DeadlineStream& next_layer() noexcept { return core_->next(); }
  SSL* native_handle() noexcept { return core_->ssl(); }

  template <typename Token>
  auto async_handshake(ssl::stream_base::handshake_type type, Token&& token) {
    if (type == ssl::stream_base::client) {
      SSL_set_connect_state(core_->ssl());
    } else {
      SSL_set_accept_state(core_->ssl());
    }
    return Start<void(ErrorCode), false>(core_->reader(), tls_detail::Step::kHandshake, nullptr,
                                         0, token);
  }

  template <typename MutableBuffers, typename Token>
  auto async_read_some(const MutableBuffers& buffers, Token&& token) {
    const asio::mutable_buffer first = FirstNonEmpty<asio::mutable_buffer>(buffers);
    return Start<void(ErrorCode, std::size_t), true>(core_->reader(), tls_detail::Step::kRead,
                                                    first.data(), first.size(), token);
  }

  template <typename ConstBuffers, typename Token>
  auto async_write_some(const ConstBuffers& buffers, Token&& token) {
    const asio::const_buffer data = Gathered(buffers);
    return Start<void(ErrorCode, std::size_t), true>(
        core_->writer(), tls_detail::Step::kWrite, const_cast<void*>(data.data()), data.size(),
        token);
  }

  // Encrypts up to kMaxWrite bytes of `data` and sends what the socket
  // takes now, without an asynchronous operation (no handler, no deadline):
  // the plaintext bytes taken (0 with `ec` set on failure). What the socket
  // did not take (unsent() != 0) leaves before the next write's bytes; a
  // write of nothing sends it. Only while no write is pending.
  std::size_t TryWrite(asio::const_buffer data, ErrorCode& ec) { return core_->TryWrite(data, ec); }
  // Encrypted bytes not sent yet.
  std::size_t unsent() const { return core_->unsent(); }

  // Gives OpenSSL's record buffers (up to ~17 KB each) back while nothing
  // waits in them, so that an idle connection holds none.
  // SSL_MODE_RELEASE_BUFFERS frees them after reads and writes, but not the
  // read buffer that a write sets up when it also sends post-handshake
  // messages (session tickets). Only while no read or write is pending.
  // (SSL_free_buffers freed a buffer that a partly received record still
  // used before OpenSSL 3.0.14, 3.1.6, 3.2.2 and 3.3.1: CVE-2024-4741;
  // with those it does nothing then.)
  void ReleaseBuffers() {
    SSL* ssl = core_->ssl();
    if (kFreeBuffersIsSafe && SSL_has_pending(ssl) == 0 && unsent() == 0) SSL_free_buffers(ssl);
  }

  // Decrypts into `buffer` what has arrived, without waiting (no handler,
  // no deadline): the plaintext bytes read, 0 when there is none yet (wait
  // for the socket to be readable, then try again), or `ec` set as
  // async_read_some sets it. `exhausted`: nothing more has arrived, so the
  // next read can wait at once. Only while no read is pending.
  std::size_t TryRead(asio::mutable_buffer buffer, ErrorCode& ec, bool& exhausted) {
    return core_->TryRead(buffer, ec, exhausted);
  }

  // Sends close_notify, after anything still unsent, and completes: it does
  // not wait for the peer's (RFC 8446 6.1 does not ask for it; nginx does
  // not wait either).
  template <typename Token>
  auto async_shutdown(Token&& token) {
    return Start<void(ErrorCode), false>(core_->writer(), tls_detail::Step::kShutdown, nullptr,
                                         0, token);
  }

 private:
  // The state is set when the operation is initiated (a lazy token may
  // initiate later than this call).
  template <typename Signature, bool kWithSize, typename Token>
  auto Start(tls_detail::OpState& op, tls_detail::Step step, void* data, std::size_t size,
             Token& token) {
    return asio::async_initiate<Token, Signature>(
        [](auto handler, tls_detail::OpState* state, tls_detail::Step s, void* d, std::size_t n) {
          *state = tls_detail::OpState{state->core, s, d, n};
          tls_detail::Operation<decltype(handler), kWithSize>{std::move(handler), state}.Start();
        },
        token, &op, step, data, size);
  }

  template <typename Buffer, typename Buffers>
  static Buffer FirstNonEmpty(const Buffers& buffers) {
    if constexpr (std::is_convertible_v<Buffers, Buffer>) {
      return Buffer(buffers);
    } else {
      for (auto it = asio::buffer_sequence_begin(buffers); it != asio::buffer_sequence_end(buffers);
           ++it) {
        Buffer b(*it);
        if (b.size() != 0) return b;
      }
      return Buffer();
    }
  }

  // What one write takes: the buffer when there is one, else the first
  // kMaxWrite bytes of the sequence copied together (one record rather than
  // one per buffer).
  template <typename ConstBuffers>
  asio::const_buffer Gathered(const ConstBuffers& buffers) {
    const asio::const_buffer first = FirstNonEmpty<asio::const_buffer>(buffers);
    if constexpr (!std::is_convertible_v<ConstBuffers, asio::const_buffer>) {
      const std::size_t total = asio::buffer_size(buffers);
      if (first.size() < total && first.size() < tls_detail::kMaxWrite) {
        std::string& gather = core_->gather();
        gather.resize(std::min(total, tls_detail::kMaxWrite));
        const std::size_t n = asio::buffer_copy(asio::buffer(gather), buffers);
        return asio::const_buffer(gather.data(), n);
      }
    }
    return asio::const_buffer(first.data(), std::min(first.size(), tls_detail::kMaxWrite));
  }

  std::unique_ptr<tls_detail::Core> core_;
};

}  // namespace tollgate::gateway
