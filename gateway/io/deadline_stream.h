// DeadlineStream: a TCP stream whose reads and writes time out, with the
// interface and timeout semantics of beast::basic_stream (expires_after()
// sets the deadline of the next read and of the next write; when it passes
// with the operation still pending, the operation completes with
// beast::error::timeout; an operation started after its deadline has passed
// times out at once). A write that times out closes the socket, as in
// basic_stream; a read that times out only ends receiving (shutdown), so
// that the stream can still write an answer (408) before it is closed.
//
// What differs is the cost: basic_stream starts and cancels a timer wait for
// every read and every write, two timer-queue changes and one more handler
// each. Here expires_after() only records the deadline; one watchdog wait per
// connection, moved only when a deadline comes earlier than the one it waits
// for, checks the deadlines when it fires and waits again for the next one.
//
// A read into one buffer that comes back short, with the kernel saying that
// nothing (no data, no end of stream) is left, makes the next read wait for
// the socket to be readable instead of trying it at once (draining_read.h).
//
// Single-threaded: use from the executor of the socket. Shared state (socket,
// timer, deadlines) lives in a heap object that pending operations keep alive,
// so the stream may be destroyed with operations pending (they complete with
// operation_aborted).
#pragma once

#include <boost/asio/append.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include "gateway/io/draining_read.h"
#include "gateway/io/io_types.h"
#include "gateway/io/readable_wait.h"
#include "gateway/io/socket_internals.h"
#include "base/loop_time.h"

namespace tollgate::gateway {

namespace deadline_detail {

enum Direction : int { kRead = 0, kWrite = 1 };

using Clock = std::chrono::steady_clock;

struct State : std::enable_shared_from_this<State> {
  explicit State(TcpSocket s) : socket(std::move(s)), timer(socket.get_executor()) {}

  // Deadlines of the directions with nothing pending become `t`.
  void ExpiresAt(Clock::time_point t);
  // An operation in `direction` starts; one whose deadline passed already
  // times out at once (TimeOut: it then fails and reports a timeout).
  void Begin(Direction direction);
  // Makes the operation pending in `direction` fail: a write by closing
  // the socket, a read by shutting down its receiving side.
  void TimeOut(Direction direction);
  // It completed: a timeout is reported as such.
  void Finish(Direction direction, ErrorCode& ec);
  void Close();
  std::size_t TryWrite(asio::const_buffer buffer, ErrorCode& ec);

  TcpSocket socket;
  Timer timer;

 private:
  void Watch(Clock::time_point t);
  void OnWatch(std::uint64_t generation, const ErrorCode& ec);

  Clock::time_point deadline_[2] = {Clock::time_point::max(), Clock::time_point::max()};
  bool pending_[2] = {false, false};
  bool expired_[2] = {false, false};                       // deadline passed with nothing pending
  bool timed_out_[2] = {false, false};                     // deadline passed while pending
  Clock::time_point armed_at_ = Clock::time_point::max();  // of the watchdog wait
  std::uint64_t generation_ = 0;                           // of the current wait
};

// Completion of a read or write: clears its pending state, turns a timeout
// into beast::error::timeout, then calls the caller's handler (whose
// executor, allocator and cancellation slot it carries, see below) inside a
// store::HandlerTime scope: the step it resumes reads the clock once.
template <typename Handler>
struct Completion {
  Handler handler;
  std::shared_ptr<State> state;
  Direction direction;
  // A connect StartConnect() left in progress: this completes the wait for
  // its socket to be writable, and the connect's own outcome is SO_ERROR.
  int connect_fd = -1;

  template <typename... Args>
  void operator()(ErrorCode ec, Args&&... args) {
    const store::HandlerTime handler_time;
    if (connect_fd >= 0 && !ec) ec = ConnectOutcome(connect_fd);
    state->Finish(direction, ec);
    std::move(handler)(ec, std::forward<Args>(args)...);
  }
};

}  // namespace deadline_detail

class DeadlineStream {
 public:
  using executor_type = Executor;
  using socket_type = TcpSocket;
  using lowest_layer_type = TcpSocket;  // for asio::ssl::stream

  explicit DeadlineStream(const Executor& executor) : DeadlineStream(TcpSocket(executor)) {}
  explicit DeadlineStream(TcpSocket socket)
      : state_(std::make_shared<deadline_detail::State>(std::move(socket))) {}
  DeadlineStream(DeadlineStream&&) noexcept = default;
  DeadlineStream& operator=(DeadlineStream&& other) noexcept {
    if (this != &other) {
      if (state_) state_->Close();
      state_ = std::move(other.state_);
    }
    return *this;
  }
  DeadlineStream(const DeadlineStream&) = delete;
  DeadlineStream& operator=(const DeadlineStream&) = delete;
  ~DeadlineStream() {
    if (state_) state_->Close();
  }

  Executor get_executor() noexcept { return state_->socket.get_executor(); }
  TcpSocket& socket() noexcept { return state_->socket; }
  TcpSocket& lowest_layer() noexcept { return state_->socket; }

  // The next read and the next write (those not already pending) time out
  // after `duration` from now (store::LoopNow(): within a completion's step,
  // the time the step read first).
  void expires_after(deadline_detail::Clock::duration duration) {
    state_->ExpiresAt(store::LoopNow() + duration);
  }
  void expires_never() { state_->ExpiresAt(deadline_detail::Clock::time_point::max()); }
  // Writes as much of `buffer` as the socket takes now, without waiting:
  // the bytes written (0 when its send buffer is full; `ec` is set on
  // failure). No asynchronous operation and no handler, so no deadline
  // applies. Only while no write is pending.
  std::size_t TryWrite(asio::const_buffer buffer, ErrorCode& ec) {
    return state_->TryWrite(buffer, ec);
  }

  // Pending operations complete with operation_aborted.
  void cancel() {
    ErrorCode ignored;
    state_->socket.cancel(ignored);
  }
  void close() { state_->Close(); }

  template <typename MutableBuffers, typename Token>
  auto async_read_some(const MutableBuffers& buffers, Token&& token) {
    return Initiate<void(ErrorCode, std::size_t)>(
        deadline_detail::kRead, token, [buffers](TcpSocket& socket, auto completion) {
          if constexpr (std::is_convertible_v<MutableBuffers, asio::mutable_buffer>) {
            socket.async_read_some(DrainingRead(buffers), std::move(completion));
          } else {
            socket.async_read_some(buffers, std::move(completion));
          }
        });
  }

  // A read's wait without its buffer: completes (with no error, 0 bytes)
  // when the socket may be readable, or with the read's deadline, as a read
  // would. Costs no system call to start (gateway/io/readable_wait.h); the
  // caller then reads with ReadNow (gateway/io/read_now.h).
  template <typename Token>
  auto async_wait_readable(Token&& token) {
    return Initiate<void(ErrorCode, std::size_t)>(
        deadline_detail::kRead, token, [](TcpSocket& socket, auto completion) {
          socket.async_receive(ReadableWait(), ReadableWait::kFlags, std::move(completion));
        });
  }

  template <typename ConstBuffers, typename Token>
  auto async_write_some(const ConstBuffers& buffers, Token&& token) {
    return Initiate<void(ErrorCode, std::size_t)>(
        deadline_detail::kWrite, token, [buffers](TcpSocket& socket, auto completion) {
          socket.async_write_some(buffers, std::move(completion));
        });
  }

  // Counts as a write for its deadline, as in basic_stream. The socket is
  // opened and connected with StartConnect() (two system calls fewer than
  // Asio's async_connect) where it can be.
  template <typename Token>
  auto async_connect(const tcp::endpoint& endpoint, Token&& token) {
    return Initiate<void(ErrorCode)>(
        deadline_detail::kWrite, token, [endpoint](TcpSocket& socket, auto completion) {
          ErrorCode ec;
          switch (StartConnect(socket, endpoint, ec)) {
            case ConnectStart::kInProgress:
              completion.connect_fd = socket.native_handle();
              socket.async_wait(TcpSocket::wait_write, std::move(completion));
              return;
            case ConnectStart::kDone:
              asio::post(socket.get_executor(), asio::append(std::move(completion), ec));
              return;
            case ConnectStart::kUnsupported:
              socket.async_connect(endpoint, std::move(completion));
              return;
          }
        });
  }

 private:
  // Starts `op(socket, completion)` as an operation in `direction`: its
  // deadline applies, and its completion reports a timeout as such.
  template <typename Signature, typename Token, typename Op>
  auto Initiate(deadline_detail::Direction direction, Token& token, Op op) {
    return asio::async_initiate<Token, Signature>(
        [](auto handler, const std::shared_ptr<deadline_detail::State>& state,
           deadline_detail::Direction d, Op o) {
          state->Begin(d);
          o(state->socket,
            deadline_detail::Completion<decltype(handler)>{std::move(handler), state, d});
        },
        token, state_, direction, std::move(op));
  }

  std::shared_ptr<deadline_detail::State> state_;
};

}  // namespace tollgate::gateway

namespace boost::asio {

// A Completion is associated with what its inner handler is associated with
// (executor, allocator, cancellation slot), as Asio's own binders are.
template <template <typename, typename> class Associator, typename Handler,
          typename DefaultCandidate>
struct associator<Associator, tollgate::gateway::deadline_detail::Completion<Handler>,
                  DefaultCandidate> : Associator<Handler, DefaultCandidate> {
  static typename Associator<Handler, DefaultCandidate>::type get(
      const tollgate::gateway::deadline_detail::Completion<Handler>& h) noexcept {
    return Associator<Handler, DefaultCandidate>::get(h.handler);
  }
  static auto get(const tollgate::gateway::deadline_detail::Completion<Handler>& h,
                  const DefaultCandidate& c) noexcept
      -> decltype(Associator<Handler, DefaultCandidate>::get(h.handler, c)) {
    return Associator<Handler, DefaultCandidate>::get(h.handler, c);
  }
};

}  // namespace boost::asio
