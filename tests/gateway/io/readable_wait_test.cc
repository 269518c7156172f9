// ReadableWait completes when a socket that a read found drained may be
// readable again, whether epoll reports it before or after the wait starts,
// and reads nothing itself. Real loopback sockets.
#include "gateway/io/readable_wait.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <optional>
#include <string>

#include "gateway/io/draining_read.h"
#include "gateway/io/net.h"
#include "gateway/io/socket_internals.h"

namespace tollgate::gateway {
namespace {

using std::chrono::milliseconds;

class ReadableWaitTest : public ::testing::Test {
 protected:
  ReadableWaitTest() : acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}), peer_(io_) {
    peer_.connect(acceptor_.local_endpoint());
    acceptor_.accept(socket_);
    EnableDrainingReads(socket_.native_handle());  // as the gateway's sockets
  }

  // Runs the context until `done` or 5 s; the guard keeps it asking epoll
  // while nothing is pending.
  template <typename Done>
  void RunUntil(Done done) {
    auto work = asio::make_work_guard(io_);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!done() && std::chrono::steady_clock::now() < give_up) {
      io_.restart();
      io_.run_for(milliseconds(10));
    }
  }
  // The peer sends `bytes` to a read through the reactor, which takes them
  // all and records the socket as drained. The read waits first, so that
  // the event of their arrival is the one that completes it (no event is
  // left for the reactor to record later).
  void SendAndDrain(const std::string& bytes) {
    char buffer[64];
    std::optional<std::size_t> got;
    socket_.async_receive(DrainingRead(asio::buffer(buffer)),
                          [&](ErrorCode ec, std::size_t n) { got = ec ? 0 : n; });
    Poll();
    asio::write(peer_, asio::buffer(bytes));
    RunUntil([&] { return got.has_value(); });
    ASSERT_EQ(got, bytes.size());
  }
  // Runs what is ready now, epoll's events included, without waiting.
  void Poll() {
    io_.restart();  // a context that ran out of work stays stopped until then
    io_.poll();
  }
  void StartWait() {
    wait_ec_.reset();
    socket_.async_receive(ReadableWait(), ReadableWait::kFlags,
                          [this](ErrorCode ec, std::size_t) { wait_ec_ = ec; });
  }
  // Runs until the wait completes: true when it did, without an error.
  bool WaitCompletes() {
    RunUntil([&] { return wait_ec_.has_value(); });
    return wait_ec_ && !*wait_ec_;
  }
  // A wait started now stays pending while nothing arrives, and completes
  // once the peer sends `bytes`, which it leaves to be read.
  void ExpectWaitUntilPeerSends(const std::string& bytes) {
    StartWait();
    Poll();
    EXPECT_FALSE(wait_ec_) << "nothing arrived";
    asio::write(peer_, asio::buffer(bytes));
    EXPECT_TRUE(WaitCompletes());
    EXPECT_EQ(ReadNow(), bytes);
  }
  // What the socket holds, read without the reactor.
  std::string ReadNow() {
    char buffer[64];
    const ssize_t n = ::recv(socket_.native_handle(), buffer, sizeof buffer, MSG_DONTWAIT);
    return n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : std::string();
  }

  asio::io_context io_;
  Acceptor acceptor_;
  TcpSocket peer_;
  TcpSocket socket_{io_};
  std::optional<ErrorCode> wait_ec_;
};

TEST_F(ReadableWaitTest, CompletesWhenDataArrivesAndReadsNothing) {
  SendAndDrain("x");
  ExpectWaitUntilPeerSends("y");
}

// Data that epoll reported while no wait was there (the reader was busy
// elsewhere after the read that drained the socket) completes the next wait
// at once; that wait counts the socket as drained again, so the one after it
// waits for a new event instead of completing at once forever.
TEST_F(ReadableWaitTest, AnEventBeforeTheWaitCompletesItOnce) {
  SendAndDrain("x");
  asio::write(peer_, asio::buffer("z", 1));
  RunUntil([&] { return ReadMayFindData(socket_); });
  ASSERT_TRUE(ReadMayFindData(socket_)) << "the reactor saw the byte arrive";
  StartWait();
  EXPECT_TRUE(WaitCompletes());
  EXPECT_EQ(ReadNow(), "z");
  ExpectWaitUntilPeerSends("w");
}

TEST_F(ReadableWaitTest, CancelledWaitIsAborted) {
  SendAndDrain("x");
  StartWait();
  Poll();
  socket_.cancel();
  RunUntil([&] { return wait_ec_.has_value(); });
  ASSERT_TRUE(wait_ec_);
  EXPECT_EQ(*wait_ec_, asio::error::operation_aborted);
}

}  // namespace
}  // namespace tollgate::gateway
