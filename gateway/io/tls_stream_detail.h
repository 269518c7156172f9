// Internal to TlsStream (tls_stream.h): the connection's state (Core,
// implemented in tls_stream.cc), the operation that runs its steps inside
// Asio's reactor, and the specializations of Asio's reactor socket
// operations that make a TLS step their "perform". Relies on Asio 1.81's
// epoll reactor internals. Single-threaded, as TlsStream.
#pragma once

#include <openssl/ssl.h>

#include <boost/asio/append.hpp>
#include <boost/asio/associator.hpp>
#include <boost/asio/basic_stream_socket.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/post.hpp>
#include <boost/version.hpp>
#include <cstddef>
#include <string>
#include <utility>

#include "gateway/io/deadline_stream.h"

#if !(BOOST_VERSION / 100 == 1081 && defined(BOOST_ASIO_HAS_EPOLL) && \
      !defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT))
#error "TlsStream performs its steps inside Asio 1.81's epoll reactor (Boost 1.81, Debian 12)"
#endif

namespace tollgate::gateway {

namespace tls_detail {

// The plaintext one write passes to SSL_write at most: four full records,
// sent together.
inline constexpr std::size_t kMaxWrite = 64 * 1024;

enum class Step { kHandshake, kRead, kWrite, kShutdown };
enum class Need { kDone, kReadable, kWritable };

class Core;

// One operation's progress, kept in the Core (a stable address that the
// reactor operation points to).
struct OpState {
  Core* core = nullptr;
  Step step = Step::kRead;
  void* data = nullptr;  // read into / write from
  std::size_t size = 0;
  std::size_t done = 0;   // bytes read or written, once it completes
  bool called = false;    // the SSL call succeeded; its output is being sent
  Need need = Need::kDone;  // what it waits for next
};

// The connection: the TCP stream, the SSL object and its BIO, and the
// ciphertext written but not yet sent. On the heap, where the BIO points.
class Core {
 public:
  Core(DeadlineStream next, SSL_CTX* ctx);
  ~Core();
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  DeadlineStream& next() { return next_; }
  SSL* ssl() { return ssl_; }
  // The state of the read side (reads, the handshake) and of the write side
  // (writes, the shutdown).
  OpState& reader() { return reader_; }
  OpState& writer() { return writer_; }
  // The plaintext of a gathered write (several buffers), until encrypted.
  std::string& gather() { return gather_; }

  // TlsStream::TryWrite() and TryRead().
  std::size_t TryWrite(asio::const_buffer data, ErrorCode& ec);
  std::size_t TryRead(asio::mutable_buffer buffer, ErrorCode& ec, bool& exhausted);

  // One step of `op`: makes the SSL call (once), and sends its output with
  // what earlier steps left unsent (a read only what the socket takes at
  // once). kDone: finished, `ec` says how, `op.done` what it moved. Else
  // what to wait for.
  Need Perform(OpState& op, ErrorCode& ec);

  // The BIO's: a receive into OpenSSL's buffer (> 0 bytes, -1 nothing now
  // or the end of the stream, -2 failed) and an append to the output.
  int Receive(char* data, int size);
  int Append(const char* data, int size);
  std::size_t unsent() const { return out_.size() - out_sent_; }
  // The last Perform() received everything the socket held (TCP_INQ).
  bool exhausted() const { return exhausted_; }

 private:
  // Sends what is pending: true when all of it went, false when the socket
  // is full (`ec` clear) or failed (`ec` set, and set for every later send).
  bool Flush(ErrorCode& ec);
  // Flush(), for output whose failure the next write reports.
  void SendWhatFits();
  // Perform()'s SSL call returned `result` (<= 0): an error (`ec`), the end
  // of the stream, or what to wait for.
  Need Failed(const OpState& op, int result, ErrorCode& ec);
  // The error of a failed SSL call (SSL_get_error's `ssl_error`).
  ErrorCode Failure(int ssl_error);
  // A read that needs more after the end of the stream: eof after the
  // peer's close_notify, stream_truncated without.
  ErrorCode EndOfStream() const;

  DeadlineStream next_;
  SSL* ssl_ = nullptr;
  OpState reader_;
  OpState writer_;
  std::string out_;           // ciphertext to send
  std::size_t out_sent_ = 0;  // of out_
  std::string gather_;
  ErrorCode io_error_;     // the last failure of a receive
  ErrorCode write_error_;  // the failure of a send, which ends sending
  bool eof_ = false;       // a receive found the end of the stream
  bool exhausted_ = false;
};

// The buffer sequences of the reactor operations that perform a step: the
// operation, and one buffer that only keeps Asio from completing them
// without a perform (it does so for empty ones).
struct RecvStep {
  using value_type = asio::mutable_buffer;
  using const_iterator = const asio::mutable_buffer*;
  const_iterator begin() const { return &buffer; }
  const_iterator end() const { return &buffer + 1; }
  asio::mutable_buffer buffer;
  OpState* op;
};
struct SendStep {
  using value_type = asio::const_buffer;
  using const_iterator = const asio::const_buffer*;
  const_iterator begin() const { return &buffer; }
  const_iterator end() const { return &buffer + 1; }
  asio::const_buffer buffer;
  OpState* op;
};

// The reactor's perform for those: the step, and what the reactor makes of
// it (done, done with the socket left empty, or not done: wait for epoll).
// `direction`: the readiness the operation can wait for itself.
enum class PerformResult { kDone, kDoneExhausted, kNotDone };
PerformResult PerformStep(OpState& op, Need direction, ErrorCode& ec, std::size_t& bytes);

// An operation in progress: a reactor receive or send per step, until one
// completes it; then its handler, with the signature of its kind. A
// receive step is timed by the stream's read deadline, a send step by its
// write deadline (a handshake takes both; a read never sends, a write never
// receives).
template <typename Handler, bool kWithSize>
struct Operation {
  Handler handler;
  OpState* op;

  // Starts the first step.
  void Start() {
    Need need = op->step == Step::kRead || op->step == Step::kHandshake ? Need::kReadable
                                                                        : Need::kWritable;
    if constexpr (kWithSize) {
      if (op->step == Step::kRead && SSL_has_pending(op->core->ssl()) == 1) {
        // Bytes already in OpenSSL's buffer: the reactor may hold the
        // socket for empty and wait for epoll; the step must run now.
        ErrorCode ec;
        need = op->core->Perform(*op, ec);
        if (need == Need::kDone) {
          Executor executor = op->core->next().get_executor();
          asio::post(executor, asio::append(std::move(handler), ec, op->done));
          return;
        }
      }
    }
    Next(need);
  }

  void operator()(ErrorCode ec, std::size_t /*bytes*/) {
    if (!ec && op->need != Need::kDone) {
      Next(op->need);
      return;
    }
    Finish(std::move(handler), ec, op->done);
  }

 private:
  void Next(Need need) {
    static char dummy;
    DeadlineStream& next = op->core->next();
    OpState* state = op;
    // DeadlineStream's read and write: the read or write deadline, and the
    // socket's receive or send with these sequences.
    if (need == Need::kReadable) {
      next.async_read_some(RecvStep{asio::mutable_buffer(&dummy, 1), state}, std::move(*this));
    } else {
      next.async_write_some(SendStep{asio::const_buffer(&dummy, 1), state}, std::move(*this));
    }
  }
  static void Finish(Handler&& h, const ErrorCode& ec, std::size_t n) {
    if constexpr (kWithSize) {
      std::move(h)(ec, n);
    } else {
      std::move(h)(ec);
    }
  }
};

}  // namespace tls_detail

}  // namespace tollgate::gateway

namespace boost::asio {

// An Operation is associated with what its handler is associated with
// (executor, allocator, cancellation slot), as Asio's own composed
// operations are.
template <template <typename, typename> class Associator, typename Handler, bool kWithSize,
          typename DefaultCandidate>
struct associator<Associator, tollgate::gateway::tls_detail::Operation<Handler, kWithSize>,
                  DefaultCandidate> : Associator<Handler, DefaultCandidate> {
  static typename Associator<Handler, DefaultCandidate>::type get(
      const tollgate::gateway::tls_detail::Operation<Handler, kWithSize>& h) noexcept {
    return Associator<Handler, DefaultCandidate>::get(h.handler);
  }
  static auto get(const tollgate::gateway::tls_detail::Operation<Handler, kWithSize>& h,
                  const DefaultCandidate& c) noexcept
      -> decltype(Associator<Handler, DefaultCandidate>::get(h.handler, c)) {
    return Associator<Handler, DefaultCandidate>::get(h.handler, c);
  }
};

namespace detail {

// The steps as the reactor's receive and send operations (see the top of
// tls_stream.h): what Asio's socket operations do with their buffers, these do
// with the TLS step.
template <>
inline reactor_op::status reactive_socket_recv_op_base<tollgate::gateway::tls_detail::RecvStep>::
    do_perform(reactor_op* base) {
  auto* o = static_cast<reactive_socket_recv_op_base*>(base);
  using tollgate::gateway::tls_detail::PerformResult;
  switch (tollgate::gateway::tls_detail::PerformStep(*o->buffers_.op,
                                                     tollgate::gateway::tls_detail::Need::kReadable,
                                                     o->ec_, o->bytes_transferred_)) {
    case PerformResult::kDone:
      return done;
    case PerformResult::kDoneExhausted:
      return done_and_exhausted;
    case PerformResult::kNotDone:
      break;
  }
  return not_done;
}

template <>
inline reactor_op::status reactive_socket_send_op_base<tollgate::gateway::tls_detail::SendStep>::
    do_perform(reactor_op* base) {
  auto* o = static_cast<reactive_socket_send_op_base*>(base);
  using tollgate::gateway::tls_detail::PerformResult;
  switch (tollgate::gateway::tls_detail::PerformStep(*o->buffers_.op,
                                                     tollgate::gateway::tls_detail::Need::kWritable,
                                                     o->ec_, o->bytes_transferred_)) {
    case PerformResult::kDone:
    case PerformResult::kDoneExhausted:
      return done;
    case PerformResult::kNotDone:
      break;
  }
  return not_done;
}

}  // namespace detail
}  // namespace boost::asio
