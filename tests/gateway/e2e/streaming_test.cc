// Bodies far larger than any buffer pass in both directions with bounded
// memory.
#include <gtest/gtest.h>

#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "test_support.h"

namespace tollgate::testing {
namespace {

namespace asio = boost::asio;

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
// Gateway, echo server and client together hold a few buffers, not the body.
constexpr std::int64_t kMaxGrowthKiB = 64 * 1024;

std::int64_t ResidentKiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return 0;
}

class Streaming : public ::testing::Test {
 protected:
  void SetUp() override {
    echo_ = StartEcho();
    gateway_ = std::make_unique<TestGateway>(BasicConfig("[limits]\nmax_body_bytes = 2147483648\n"),
                                             echo_->port());
  }
  std::unique_ptr<gateway::EchoUpstream> echo_;
  std::unique_ptr<TestGateway> gateway_;
};

TEST_F(Streaming, OneGibibyteUpload) {
  Client client(gateway_->port(), 30000);
  const std::int64_t before = ResidentKiB();
  std::int64_t peak = before;
  client.Send("POST /_test/count HTTP/1.1\r\nHost: t\r\nContent-Length: " + std::to_string(kGiB) +
              "\r\n\r\n");
  const std::string block(256 * 1024, 'z');
  for (std::uint64_t sent = 0; sent < kGiB; sent += block.size()) {
    asio::write(client.socket(), asio::buffer(block));
    if (sent % (64 << 20) == 0) peak = std::max(peak, ResidentKiB());
  }
  Response res = client.Read();
  EXPECT_EQ(res.result_int(), 200);
  EXPECT_EQ(res.body(), std::to_string(kGiB) + "\n");
  EXPECT_LT(peak - before, kMaxGrowthKiB) << "KiB of growth while uploading 1 GiB";
}

TEST_F(Streaming, OneGibibyteDownload) {
  for (const std::string query : {"", "?chunked"}) {
    Client client(gateway_->port(), 30000);
    const std::int64_t before = ResidentKiB();
    std::int64_t peak = before;
    client.Send("GET /_test/bytes/" + std::to_string(kGiB) + query +
                " HTTP/1.1\r\nHost: t\r\n\r\n");
    http::response_parser<http::buffer_body> parser;
    parser.body_limit(boost::none);
    http::read_header(client.socket(), client.buffer(), parser);
    ASSERT_EQ(parser.get().result_int(), 200);
    EXPECT_EQ(parser.get().chunked(), !query.empty());
    std::uint64_t body = 0;
    char chunk[64 * 1024];
    while (!parser.is_done()) {
      parser.get().body().data = chunk;
      parser.get().body().size = sizeof(chunk);
      boost::system::error_code ec;
      http::read(client.socket(), client.buffer(), parser, ec);
      if (ec == http::error::need_buffer) ec = {};
      ASSERT_FALSE(ec) << ec.message() << " after " << body;
      const std::uint64_t before_body = body;
      body += sizeof(chunk) - parser.get().body().size;
      if (before_body / (64 << 20) != body / (64 << 20)) peak = std::max(peak, ResidentKiB());
    }
    EXPECT_EQ(body, kGiB);
    EXPECT_LT(peak - before, kMaxGrowthKiB) << "KiB of growth while downloading 1 GiB";
  }
}

// [timeouts] request ends the whole exchange: a body dripping one byte at a
// time, each read well within client_body (or upstream_response), cannot
// hold the connections past it.
constexpr const char* kShortRequest =
    "[timeouts]\nrequest = \"700ms\"\nclient_body = \"2s\"\nupstream_response = \"2s\"\n";

TEST(StreamingDeadline, ADrippedRequestBodyEndsAtTheRequestTimeout) {
  auto echo = StartEcho();
  TestGateway gateway(BasicConfig(kShortRequest), echo->port(), TestClock::kSteady);
  Client client(gateway.port(), 5000);
  client.Send("POST /_test/count HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
  const auto start = std::chrono::steady_clock::now();
  try {
    // One byte every 100 ms for up to 5 s, until the gateway answers.
    for (int i = 0; i < 50 && client.socket().available() == 0; ++i) {
      client.Send("1\r\nx\r\n");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  } catch (const std::exception&) {
    // The gateway closed the connection after answering.
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
  EXPECT_EQ(client.Read().result_int(), 408);
}

TEST(StreamingDeadline, ADrippedResponseBodyEndsAtTheRequestTimeout) {
  auto echo = StartEcho();
  TestGateway gateway(BasicConfig(kShortRequest), echo->port(), TestClock::kSteady);
  Client client(gateway.port(), 10000);
  // 100 bytes, one every 100 ms, each within upstream_response: only the
  // request timeout can end it before its last chunk, which the check below
  // looks for (no elapsed time asserted).
  client.Send("GET /_test/drip/100?every=100 HTTP/1.1\r\nHost: t\r\n\r\n");
  const std::string received = client.ReadToClose();
  EXPECT_NE(received.find("200 OK"), std::string::npos) << received;
  EXPECT_EQ(received.find("\r\n0\r\n\r\n"), std::string::npos) << "the body was not cut short";
}

}  // namespace
}  // namespace tollgate::testing
