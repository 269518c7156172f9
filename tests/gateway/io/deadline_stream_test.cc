// DeadlineStream keeps beast::basic_stream's timeout semantics with one
// watchdog wait per connection. Real loopback sockets and short real
// deadlines (the stream reads steady_clock, as basic_stream does); bounds
// are generous: a test fails only when a deadline is ignored altogether.
#include "gateway/io/deadline_stream.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <fcntl.h>
#include <sys/socket.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/read.hpp>
#include <boost/version.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/io/net.h"
#include "gateway/io/socket_internals.h"
#include "base/loop_time.h"

namespace tollgate::gateway {
namespace {

using std::chrono::milliseconds;

class DeadlineStreamTest : public ::testing::Test {
 protected:
  DeadlineStreamTest() : acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}), peer_(io_) {
    TcpSocket accepted(io_);
    peer_.connect(acceptor_.local_endpoint());
    acceptor_.accept(accepted);
    EnableDrainingReads(accepted.native_handle());  // as the gateway's sockets
    stream_.emplace(std::move(accepted));
  }

  // Starts a read of up to `size` bytes into read_buffer_; its result lands
  // in read_ec_ / read_n_.
  void StartRead(std::size_t size = 1) {
    read_buffer_.resize(size);
    read_ec_.reset();
    stream_->async_read_some(asio::buffer(read_buffer_), [this](ErrorCode ec, std::size_t n) {
      read_ec_ = ec;
      read_n_ = n;
    });
  }
  // The peer sends one byte after `delay`.
  void PeerSendsAfter(milliseconds delay) {
    peer_timer_.expires_after(delay);
    peer_timer_.async_wait([this](ErrorCode) { asio::write(peer_, asio::buffer("x", 1)); });
  }
  // Reads up to `size` bytes: what came, or "(failed)".
  std::string ReadSome(std::size_t size) {
    StartRead(size);
    RunUntilRead();
    if (!read_ec_ || *read_ec_) return "(failed)";
    return std::string(read_buffer_.data(), read_n_);
  }
  // While a read waits, the peer sends "ab" and ends its stream: the read
  // gets "ab", the next one the end of stream.
  void ExpectDataThenEndOfStreamArrivingTogether() {
    StartRead(16);
    asio::write(peer_, asio::buffer(std::string_view("ab")));
    peer_.shutdown(TcpSocket::shutdown_send);
    RunUntilRead();
    ASSERT_TRUE(read_ec_);
    EXPECT_FALSE(*read_ec_);
    EXPECT_EQ(std::string(read_buffer_.data(), read_n_), "ab");
    StartRead(16);
    RunUntilRead();
    ASSERT_TRUE(read_ec_) << "the read still waits";
    EXPECT_EQ(*read_ec_, asio::error::eof);
  }
  // Runs until the read completed (or a bound far above every deadline used).
  void RunUntilRead() {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!read_ec_ && std::chrono::steady_clock::now() < give_up) {
      io_.restart();  // run_for() stops the context whenever it runs out of work
      io_.run_for(milliseconds(10));
    }
  }

  asio::io_context io_;
  Acceptor acceptor_;
  TcpSocket peer_;
  Timer peer_timer_{io_};
  std::optional<DeadlineStream> stream_;
  std::vector<char> read_buffer_;
  std::optional<ErrorCode> read_ec_;
  std::size_t read_n_ = 0;
};

// The stream stays open for writing: the answer to a client too slow to
// send its request (408) can still be written.
TEST_F(DeadlineStreamTest, ReadPastItsDeadlineIsATimeoutAndEndsReceivingOnly) {
  stream_->expires_after(milliseconds(20));
  StartRead();
  RunUntilRead();
  ASSERT_TRUE(read_ec_);
  EXPECT_EQ(*read_ec_, beast::error::timeout);
  ASSERT_TRUE(stream_->socket().is_open());
  asio::write(stream_->socket(), asio::buffer("408", 3));
  char answer[3];
  asio::read(peer_, asio::buffer(answer));
  EXPECT_EQ(std::string(answer, 3), "408");
}

TEST_F(DeadlineStreamTest, ADeadlinePushedBackLetsTheReadWait) {
  stream_->expires_after(milliseconds(20));
  stream_->expires_after(std::chrono::seconds(10));  // the watchdog fires at 20 ms and waits again
  StartRead();
  PeerSendsAfter(milliseconds(100));
  RunUntilRead();
  ASSERT_TRUE(read_ec_);
  EXPECT_FALSE(*read_ec_) << read_ec_->message();
  EXPECT_EQ(read_n_, 1U);
}

TEST_F(DeadlineStreamTest, AnEarlierDeadlineMovesTheWatchdog) {
  stream_->expires_after(std::chrono::seconds(60));
  stream_->expires_after(milliseconds(20));
  StartRead();
  RunUntilRead();  // gives up after 5 s: the 60 s wait would not do
  ASSERT_TRUE(read_ec_);
  EXPECT_EQ(*read_ec_, beast::error::timeout);
}

TEST_F(DeadlineStreamTest, AnOperationStartedAfterItsDeadlineTimesOutAtOnce) {
  stream_->expires_after(milliseconds(10));
  io_.run_for(milliseconds(60));  // the deadline passes with nothing pending
  asio::write(peer_, asio::buffer("x", 1));
  StartRead();  // data is there, but the deadline is gone
  RunUntilRead();
  ASSERT_TRUE(read_ec_);
  EXPECT_EQ(*read_ec_, beast::error::timeout);
}

TEST_F(DeadlineStreamTest, ANewDeadlineLeavesAPendingReadsDeadlineAlone) {
  stream_->expires_after(milliseconds(20));
  StartRead();
  stream_->expires_never();  // applies to the next write only
  RunUntilRead();
  ASSERT_TRUE(read_ec_);
  EXPECT_EQ(*read_ec_, beast::error::timeout);
}

TEST_F(DeadlineStreamTest, NoDeadlineMeansNoTimeout) {
  stream_->expires_after(milliseconds(10));
  stream_->expires_never();
  StartRead();
  PeerSendsAfter(milliseconds(60));
  RunUntilRead();
  ASSERT_TRUE(read_ec_);
  EXPECT_FALSE(*read_ec_) << read_ec_->message();
}

TEST_F(DeadlineStreamTest, WritesTimeOutToo) {
  // Fill the peer's receive window: with nobody reading, a write blocks.
  stream_->expires_after(milliseconds(50));
  std::vector<char> chunk(64 << 20, 'x');
  std::optional<ErrorCode> write_ec;
  asio::async_write(*stream_, asio::buffer(chunk),
                    [&](ErrorCode ec, std::size_t) { write_ec = ec; });
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!write_ec && std::chrono::steady_clock::now() < give_up) io_.run_for(milliseconds(10));
  ASSERT_TRUE(write_ec);
  EXPECT_EQ(*write_ec, beast::error::timeout);
}

TEST_F(DeadlineStreamTest, TryWriteWritesWhatTheSocketTakesAndNeverWaits) {
  ErrorCode ec;
  EXPECT_EQ(stream_->TryWrite(asio::buffer("hello", 5), ec), 5U);
  EXPECT_FALSE(ec) << ec.message();
  char got[5];
  asio::read(peer_, asio::buffer(got));
  EXPECT_EQ(std::string_view(got, 5), "hello");

  // With nobody reading, the socket soon takes nothing more: 0, no error.
  std::vector<char> chunk(1 << 20, 'x');
  std::size_t last = 1;
  for (int i = 0; i < 256 && last != 0; ++i) last = stream_->TryWrite(asio::buffer(chunk), ec);
  EXPECT_EQ(last, 0U);
  EXPECT_FALSE(ec) << ec.message();
}

TEST_F(DeadlineStreamTest, TryWriteReportsAClosedSocket) {
  stream_->close();
  ErrorCode ec;
  EXPECT_EQ(stream_->TryWrite(asio::buffer("x", 1), ec), 0U);
  EXPECT_TRUE(ec);
}

TEST_F(DeadlineStreamTest, DestroyedWithAReadPendingCompletesIt) {
  stream_->expires_after(std::chrono::seconds(60));
  StartRead();
  stream_.reset();
  RunUntilRead();
  ASSERT_TRUE(read_ec_);
  EXPECT_EQ(*read_ec_, asio::error::operation_aborted);
}

// After a short read the next read waits for the socket to be readable
// without trying it first (draining_read.h): data that arrives at any time
// after the short read must still reach it.
TEST_F(DeadlineStreamTest, DataArrivingAfterAShortReadReachesTheNextRead) {
  asio::write(peer_, asio::buffer(std::string_view("ab")));
  EXPECT_EQ(ReadSome(16), "ab");
  asio::write(peer_, asio::buffer(std::string_view("c")));  // before the next read starts
  EXPECT_EQ(ReadSome(16), "c");
  PeerSendsAfter(milliseconds(20));  // while the next read waits
  EXPECT_EQ(ReadSome(16), "x");
}

TEST_F(DeadlineStreamTest, AReadThatFillsItsBufferLeavesTheRestToTheNextRead) {
  asio::write(peer_, asio::buffer(std::string_view("abcd")));
  EXPECT_EQ(ReadSome(2), "ab");
  EXPECT_EQ(ReadSome(2), "cd");
}

TEST_F(DeadlineStreamTest, EndOfStreamAfterAShortReadIsReported) {
  asio::write(peer_, asio::buffer(std::string_view("ab")));
  EXPECT_EQ(ReadSome(16), "ab");
  peer_.close();
  EXPECT_EQ(ReadSome(16), "(failed)");
}

// A read waiting when the data and the peer's end of stream arrive together
// is woken by one event and takes the data: the next read must still find
// the end of stream, for which no further event comes.
TEST_F(DeadlineStreamTest, EndOfStreamArrivingWithTheDataIsReportedAfterIt) {
  ExpectDataThenEndOfStreamArrivingTogether();
}

TEST_F(DeadlineStreamTest, WithoutTheKernelsCountEveryReadIsTriedFirst) {
  const int off = 0;
  ASSERT_EQ(setsockopt(stream_->socket().native_handle(), IPPROTO_TCP, TCP_INQ, &off, sizeof off),
            0);
  ExpectDataThenEndOfStreamArrivingTogether();
}

TEST_F(DeadlineStreamTest, ACompletionHandlerReadsTheClockOnce) {
  // What the handler resumes (a step of an exchange) sees one time; after
  // it, reads are fresh again.
  using SteadyTime = std::chrono::steady_clock::time_point;
  SteadyTime first{};
  SteadyTime again{};
  asio::write(peer_, asio::buffer("x", 1));
  read_buffer_.resize(1);
  stream_->async_read_some(asio::buffer(read_buffer_), [&](ErrorCode ec, std::size_t n) {
    first = store::LoopNow();
    while (std::chrono::steady_clock::now() <= first) {
    }
    again = store::LoopNow();
    read_ec_ = ec;
    read_n_ = n;
  });
  RunUntilRead();
  ASSERT_TRUE(read_ec_);
  EXPECT_EQ(again, first);
  EXPECT_GT(store::LoopNow(), first);
}

// async_connect opens the socket itself (gateway/io/socket_internals.h).
TEST_F(DeadlineStreamTest, ConnectReachesAListeningServer) {
  DeadlineStream client(io_.get_executor());
  client.expires_after(std::chrono::seconds(5));
  std::optional<ErrorCode> connected;
  client.async_connect(acceptor_.local_endpoint(), [&](ErrorCode ec) { connected = ec; });
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!connected && std::chrono::steady_clock::now() < give_up) {
    io_.restart();
    io_.run_for(milliseconds(10));
  }
  ASSERT_TRUE(connected);
  ASSERT_FALSE(*connected) << connected->message();
  TcpSocket accepted(io_);
  acceptor_.accept(accepted);
  asio::write(client.socket(), asio::buffer(std::string_view("hi")));
  char got[2];
  asio::read(accepted, asio::buffer(got));
  EXPECT_EQ(std::string_view(got, 2), "hi");
  // Non-blocking as Asio's own sockets are, and closed on exec.
  EXPECT_NE(::fcntl(client.socket().native_handle(), F_GETFD) & FD_CLOEXEC, 0);
}

TEST_F(DeadlineStreamTest, ConnectToAClosedPortIsRefused) {
  tcp::endpoint closed;
  {
    Acceptor gone(io_, {asio::ip::make_address("127.0.0.1"), 0});
    closed = gone.local_endpoint();
  }
  DeadlineStream client(io_.get_executor());
  client.expires_after(std::chrono::seconds(5));
  std::optional<ErrorCode> connected;
  client.async_connect(closed, [&](ErrorCode ec) { connected = ec; });
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!connected && std::chrono::steady_clock::now() < give_up) {
    io_.restart();
    io_.run_for(milliseconds(10));
  }
  ASSERT_TRUE(connected);
  EXPECT_EQ(*connected, asio::error::connection_refused) << connected->message();
}

// What the upstream pool asks of an idle connection instead of a peek.
TEST_F(DeadlineStreamTest, ReadMayFindDataUntilAReadDrainedTheSocketAndAgainAfterAnEvent) {
  EXPECT_TRUE(ReadMayFindData(stream_->socket())) << "nothing read yet";
  asio::write(peer_, asio::buffer("x", 1));
  EXPECT_EQ(ReadSome(16), "x");
#if BOOST_VERSION / 100 == 1081
  EXPECT_FALSE(ReadMayFindData(stream_->socket())) << "the short read took everything";
#endif
  asio::write(peer_, asio::buffer("y", 1));
  // Nothing pending: without the guard run_for() would return at once,
  // never asking epoll (the gateway's contexts always have work).
  auto work = asio::make_work_guard(io_);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!ReadMayFindData(stream_->socket()) && std::chrono::steady_clock::now() < give_up) {
    io_.restart();
    io_.run_for(milliseconds(10));
  }
  EXPECT_TRUE(ReadMayFindData(stream_->socket())) << "the reactor saw the byte arrive";
  EXPECT_EQ(ReadSome(16), "y");
  peer_.shutdown(TcpSocket::shutdown_send);
  while (!ReadMayFindData(stream_->socket()) && std::chrono::steady_clock::now() < give_up) {
    io_.restart();
    io_.run_for(milliseconds(10));
  }
  EXPECT_TRUE(ReadMayFindData(stream_->socket())) << "an end of stream counts";
}

}  // namespace
}  // namespace tollgate::gateway
