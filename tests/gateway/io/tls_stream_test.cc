// TlsStream (gateway/io/tls_stream.h) against Asio's ssl::stream as the
// peer, on one io_context over loopback: data both ways across many
// records, a write that waits for the peer to read, records left in
// OpenSSL's buffer, the end of a stream with and without close_notify, a
// last write sent with the close_notify, a read deadline, and the server
// name check of the client side. Waits are bounded only as hang guards.
#include "gateway/io/tls_stream.h"

#include <gtest/gtest.h>
#include <openssl/err.h>

#include <array>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "../test_support.h"
#include "gateway/io/draining_read.h"
#include "gateway/io/net.h"
#include "gateway/io/tls.h"

namespace tollgate::gateway {
namespace {

using testing::MakeCertificate;
using testing::TempDir;
using PeerStream = ssl::stream<tcp::socket>;

std::string Pattern(std::size_t size) {
  std::string s(size, '\0');
  for (std::size_t i = 0; i < size; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 251) % 26);
  return s;
}

class TlsStreamTest : public ::testing::Test {
 protected:
  TlsStreamTest()
      : server_ctx_(ssl::context::tls_server),
        client_ctx_(ssl::context::tls_client),
        acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}) {
    const auto [cert, key] = MakeCertificate(dir_, "server.test");
    server_ctx_.use_certificate_chain_file(cert);
    server_ctx_.use_private_key_file(key, ssl::context::pem);
    // No TLS 1.3 tickets after the handshake (Session issues its own): the
    // peer never reads them here, and would reset the connection on close.
    SSL_CTX_set_num_tickets(server_ctx_.native_handle(), 0);
    client_ctx_.load_verify_file(cert);
    client_ctx_.set_verify_mode(ssl::verify_peer);
  }

  // A connection whose server side is a TlsStream (ours_) and whose client
  // side is Asio's stream (peer_), both handshakes done.
  void ConnectAsServer() {
    peer_.emplace(io_, client_ctx_);
    peer_->next_layer().connect(acceptor_.local_endpoint());
    ours_.emplace(Accept(), server_ctx_);
    Handshakes(ssl::stream_base::server);
  }
  // The other way round: ours_ is the client of `name`, Asio's stream
  // serves. False when a handshake failed.
  bool ConnectAsClient(const std::string& name) {
    TcpSocket socket(io_);
    socket.connect(acceptor_.local_endpoint());
    EnableDrainingReads(socket.native_handle());  // as the upstream pool's
    peer_.emplace(io_, server_ctx_);
    acceptor_.accept(peer_->next_layer());
    ours_.emplace(std::move(socket), client_ctx_);
    if (!VerifyPeerName(ours_->native_handle(), name)) return false;
    return Handshakes(ssl::stream_base::client);
  }

  // Runs the loop until `done`, for at most `guard`; false when that
  // passed first (the test then fails: ASSERT_TRUE(RunUntil(...))).
  template <typename Predicate>
  bool RunUntil(Predicate done, std::chrono::seconds guard = std::chrono::seconds(30)) {
    const auto until = std::chrono::steady_clock::now() + guard;
    while (!done() && std::chrono::steady_clock::now() < until) {
      if (io_.stopped()) io_.restart();
      io_.run_one_for(std::chrono::milliseconds(50));
    }
    return done();
  }

  // Reads with ours_ into a 64 KiB buffer: what came, with its error
  // ("(pending)" when the guard passed; the read's buffer and result are
  // the fixture's, so a read left pending points at nothing gone).
  std::string ReadOurs(ErrorCode& ec, std::chrono::seconds guard = std::chrono::seconds(30)) {
    read_buffer_.assign(64 * 1024, '\0');
    read_result_.reset();
    ours_->async_read_some(asio::buffer(read_buffer_), [this](ErrorCode e, std::size_t got) {
      read_result_ = e;
      read_n_ = got;
    });
    if (!RunUntil([&] { return read_result_.has_value(); }, guard)) {
      ec = asio::error::timed_out;
      return "(pending)";
    }
    ec = *read_result_;
    return std::string(read_buffer_.data(), read_n_);
  }

  TempDir dir_;
  asio::io_context io_;
  ssl::context server_ctx_;
  ssl::context client_ctx_;
  Acceptor acceptor_;
  std::vector<char> read_buffer_;
  std::optional<ErrorCode> read_result_;
  std::size_t read_n_ = 0;
  std::optional<PeerStream> peer_;
  std::optional<TlsStream> ours_;

 private:
  std::optional<ErrorCode> ours_result_, theirs_result_;

  TcpSocket Accept() {
    TcpSocket accepted(io_);
    acceptor_.accept(accepted);
    EnableDrainingReads(accepted.native_handle());  // as the gateway's sockets
    return accepted;
  }
  bool Handshakes(ssl::stream_base::handshake_type our_side) {
    const auto their_side =
        our_side == ssl::stream_base::server ? ssl::stream_base::client : ssl::stream_base::server;
    ours_result_.reset();
    theirs_result_.reset();
    ours_->async_handshake(our_side, [this](ErrorCode ec) { ours_result_ = ec; });
    peer_->async_handshake(their_side, [this](ErrorCode ec) { theirs_result_ = ec; });
    RunUntil([&] { return ours_result_.has_value(); });
    // A failed side's peer learns it from the alert, or else from the end
    // of the stream.
    if (!ours_result_ || *ours_result_) ours_->next_layer().close();
    RunUntil([&] { return ours_result_ && theirs_result_; });
    if (!ours_result_ || !theirs_result_) {
      ADD_FAILURE() << "hang guard";
      return false;
    }
    EXPECT_FALSE(*ours_result_ && our_side == ssl::stream_base::server)
        << ours_result_->message();
    return !*ours_result_ && !*theirs_result_;
  }
};

TEST_F(TlsStreamTest, CarriesDataBothWaysAcrossManyRecords) {
  ConnectAsServer();
  asio::write(*peer_, asio::buffer(std::string("hello")));
  ErrorCode ec;
  EXPECT_EQ(ReadOurs(ec), "hello");
  EXPECT_FALSE(ec);

  // Out: a sequence of two buffers (gathered into one write) and 1 MiB
  // more, more than the socket takes at once; the peer reads meanwhile.
  const std::string big = Pattern(1 << 20);
  const std::string head = "head:";
  std::optional<ErrorCode> wrote;
  std::array<asio::const_buffer, 2> out{asio::buffer(head), asio::buffer(big)};
  asio::async_write(*ours_, out, [&](ErrorCode e, std::size_t) { wrote = e; });
  std::string in(head.size() + big.size(), '\0');
  std::optional<ErrorCode> read;
  asio::async_read(*peer_, asio::buffer(in), [&](ErrorCode e, std::size_t) { read = e; });
  ASSERT_TRUE(RunUntil([&] { return wrote && read; }));
  EXPECT_FALSE(*wrote);
  EXPECT_FALSE(*read);
  EXPECT_TRUE(in == head + big);

  // In: 300 KiB, read whole.
  const std::string upload = Pattern(300 * 1024);
  std::optional<ErrorCode> sent;
  asio::async_write(*peer_, asio::buffer(upload), [&](ErrorCode e, std::size_t) { sent = e; });
  std::string got(upload.size(), '\0');
  std::optional<ErrorCode> received;
  asio::async_read(*ours_, asio::buffer(got), [&](ErrorCode e, std::size_t) { received = e; });
  ASSERT_TRUE(RunUntil([&] { return sent && received; }));
  EXPECT_FALSE(*received);
  EXPECT_TRUE(got == upload);
}

TEST_F(TlsStreamTest, WriteWaitsForRoomAndEndsWhenThePeerReads) {
  ConnectAsServer();
  const std::string big = Pattern(32 << 20);  // more than loopback's buffers hold
  std::optional<ErrorCode> wrote;
  asio::async_write(*ours_, asio::buffer(big), [&](ErrorCode e, std::size_t) { wrote = e; });
  while (io_.poll() > 0) {
  }
  io_.restart();
  EXPECT_FALSE(wrote.has_value()) << "the write did not wait for the peer";
  std::string in(big.size(), '\0');
  std::optional<ErrorCode> read;
  asio::async_read(*peer_, asio::buffer(in), [&](ErrorCode e, std::size_t) { read = e; });
  ASSERT_TRUE(RunUntil([&] { return wrote && read; }));
  EXPECT_FALSE(*wrote);
  EXPECT_FALSE(*read);
  EXPECT_TRUE(in == big);
}

TEST_F(TlsStreamTest, TryWriteSendsAtOnceAndAnEmptyWriteSendsWhatIsLeft) {
  ConnectAsServer();
  ErrorCode ec;
  EXPECT_EQ(ours_->TryWrite(asio::buffer(std::string("now")), ec), 3U);
  EXPECT_FALSE(ec);
  EXPECT_EQ(ours_->unsent(), 0U);
  std::string in(3, '\0');
  asio::read(*peer_, asio::buffer(in));
  EXPECT_EQ(in, "now");

  // The peer does not read: the socket fills, and records stay unsent.
  const std::string block = Pattern(tls_detail::kMaxWrite);
  std::string expected;
  while (ours_->unsent() == 0) {
    const std::size_t n = ours_->TryWrite(asio::buffer(block), ec);
    ASSERT_FALSE(ec) << ec.message();
    ASSERT_EQ(n, block.size());
    expected += block;
    ASSERT_LT(expected.size(), std::size_t{256} << 20) << "the socket never filled";
  }
  std::optional<ErrorCode> flushed;
  asio::async_write(*ours_, asio::const_buffer(), [&](ErrorCode e, std::size_t) { flushed = e; });
  std::string got(expected.size(), '\0');
  std::optional<ErrorCode> read;
  asio::async_read(*peer_, asio::buffer(got), [&](ErrorCode e, std::size_t) { read = e; });
  ASSERT_TRUE(RunUntil([&] { return flushed && read; }));
  EXPECT_FALSE(*flushed);
  EXPECT_FALSE(*read);
  EXPECT_EQ(ours_->unsent(), 0U);
  EXPECT_TRUE(got == expected);
}

TEST_F(TlsStreamTest, ReadsARecordLeftInOpenSslBufferWithoutNewData) {
  ConnectAsServer();
  // Two records in the socket before the read: one receive takes both,
  // SSL_read gives the first; the second read must not wait for epoll.
  asio::write(*peer_, asio::buffer(std::string("first")));
  asio::write(*peer_, asio::buffer(std::string("second")));
  ErrorCode ec;
  EXPECT_EQ(ReadOurs(ec), "first");
  EXPECT_EQ(ReadOurs(ec, std::chrono::seconds(5)), "second");
  EXPECT_FALSE(ec);
}

TEST_F(TlsStreamTest, EndOfStreamWithoutCloseNotifyIsTruncated) {
  ConnectAsServer();
  peer_->next_layer().close();
  ErrorCode ec;
  ReadOurs(ec);
  EXPECT_EQ(ec, ssl::error::stream_truncated) << ec.message();
}

TEST_F(TlsStreamTest, CloseNotifyIsEndOfStream) {
  ConnectAsServer();
  peer_->async_shutdown([](ErrorCode) {});  // waits for ours, which never comes
  ErrorCode ec;
  ReadOurs(ec);
  EXPECT_EQ(ec, asio::error::eof) << ec.message();
}

TEST_F(TlsStreamTest, ShutdownSendsWhatWasWrittenWithTheCloseNotify) {
  ConnectAsServer();
  // As Session::WriteLastOverTls: SSL_write only fills the stream's output.
  ASSERT_EQ(SSL_write(ours_->native_handle(), "bye", 3), 3);
  EXPECT_EQ(peer_->next_layer().available(), 0U) << "sent before the shutdown";
  std::optional<ErrorCode> closed;
  ours_->async_shutdown([&](ErrorCode e) { closed = e; });
  ASSERT_TRUE(RunUntil([&] { return closed.has_value(); }));
  EXPECT_FALSE(*closed);
  std::string in(3, '\0');
  asio::read(*peer_, asio::buffer(in));
  EXPECT_EQ(in, "bye");
  char byte;
  ErrorCode ec;
  peer_->read_some(asio::buffer(&byte, 1), ec);
  EXPECT_EQ(ec, asio::error::eof) << ec.message();
}

TEST_F(TlsStreamTest, ReadTimesOutAndTheStreamCanStillAnswer) {
  ConnectAsServer();
  ours_->next_layer().expires_after(std::chrono::milliseconds(50));
  ErrorCode ec;
  ReadOurs(ec);
  EXPECT_EQ(ec, beast::error::timeout) << ec.message();
  // As a 408: the end of the stream the timeout made did not break TLS.
  ours_->next_layer().expires_after(std::chrono::seconds(30));
  std::optional<ErrorCode> wrote, closed;
  asio::async_write(*ours_, asio::buffer(std::string("408")),
                    [&](ErrorCode e, std::size_t) { wrote = e; });
  ASSERT_TRUE(RunUntil([&] { return wrote.has_value(); }));
  EXPECT_FALSE(*wrote) << wrote->message();
  ours_->async_shutdown([&](ErrorCode e) { closed = e; });
  ASSERT_TRUE(RunUntil([&] { return closed.has_value(); }));
  EXPECT_FALSE(*closed) << closed->message();
  std::string in(3, '\0');
  asio::read(*peer_, asio::buffer(in));
  EXPECT_EQ(in, "408");
  char byte;
  peer_->read_some(asio::buffer(&byte, 1), ec);
  EXPECT_EQ(ec, asio::error::eof) << "a close_notify, not an alert: " << ec.message();
}

TEST_F(TlsStreamTest, ReadCompletesWhileAWriteWaitsForRoom) {
  ConnectAsServer();
  const std::string big = Pattern(32 << 20);
  std::optional<ErrorCode> wrote;
  asio::async_write(*ours_, asio::buffer(big), [&](ErrorCode e, std::size_t) { wrote = e; });
  while (io_.poll() > 0) {
  }
  io_.restart();
  ASSERT_FALSE(wrote.has_value()) << "the write did not wait for the peer";
  asio::write(*peer_, asio::buffer(std::string("ping")));
  ErrorCode ec;
  EXPECT_EQ(ReadOurs(ec), "ping") << "a read waited behind the write";
  EXPECT_FALSE(ec);
  std::string in(big.size(), '\0');
  std::optional<ErrorCode> read;
  asio::async_read(*peer_, asio::buffer(in), [&](ErrorCode e, std::size_t) { read = e; });
  ASSERT_TRUE(RunUntil([&] { return wrote && read; }));
  EXPECT_FALSE(*wrote);
  EXPECT_TRUE(in == big);
}

TEST_F(TlsStreamTest, ATicketIssuedBeforeAReadLeavesWithIt) {
  ConnectAsServer();
  ASSERT_EQ(SSL_new_session_ticket(ours_->native_handle()), 1);
  asio::write(*peer_, asio::buffer(std::string("x")));
  ErrorCode ec;
  EXPECT_EQ(ReadOurs(ec), "x");
  EXPECT_GT(peer_->next_layer().available(), 0U) << "the ticket waits for a write";
}

TEST_F(TlsStreamTest, Tls12CarriesData) {
  SSL_CTX_set_max_proto_version(client_ctx_.native_handle(), TLS1_2_VERSION);
  ConnectAsServer();
  EXPECT_EQ(SSL_version(ours_->native_handle()), TLS1_2_VERSION);
  asio::write(*peer_, asio::buffer(std::string("twelve")));
  ErrorCode ec;
  EXPECT_EQ(ReadOurs(ec), "twelve");
  std::optional<ErrorCode> wrote;
  asio::async_write(*ours_, asio::buffer(std::string("back")),
                    [&](ErrorCode e, std::size_t) { wrote = e; });
  ASSERT_TRUE(RunUntil([&] { return wrote.has_value(); }));
  std::string in(4, '\0');
  asio::read(*peer_, asio::buffer(in));
  EXPECT_EQ(in, "back");
}

TEST_F(TlsStreamTest, ClientChecksTheServerName) {
  // The certificate names server.test, localhost and 127.0.0.1.
  EXPECT_TRUE(ConnectAsClient("localhost"));
  EXPECT_TRUE(ConnectAsClient("127.0.0.1"));
  EXPECT_FALSE(ConnectAsClient("other.test"));
  EXPECT_FALSE(ConnectAsClient("127.0.0.2"));
}

}  // namespace
}  // namespace tollgate::gateway
