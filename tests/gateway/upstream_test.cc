// Upstream selection: round-robin over servers and passive health.
#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>
#include <map>

#include "test_support.h"

namespace tollgate::testing {
namespace {

namespace asio = boost::asio;

std::uint16_t DeadPort() {
  asio::io_context io;
  asio::ip::tcp::acceptor a(io, {asio::ip::make_address("127.0.0.1"), 0});
  return a.local_endpoint().port();
}

// `upstream_keys` go into the [[upstreams]] table.
std::string TwoServers(std::uint16_t a, std::uint16_t b, const std::string& upstream_keys = "") {
  std::string config = BasicConfig();
  config.replace(config.find("servers = [\"127.0.0.1:{ECHO}\"]"), 30,
                 "servers = [\"127.0.0.1:" + std::to_string(a) +
                     "\", \"127.0.0.1:" + std::to_string(b) + "\"]\n" + upstream_keys);
  return config;
}

TEST(Upstreams, RoundRobin) {
  auto one = StartEcho();
  auto two = StartEcho();
  TestGateway gateway(TwoServers(one->port(), two->port()), 0);
  std::map<std::string, int> seen;
  std::string previous;
  for (int i = 0; i < 10; ++i) {
    Client client(gateway.port());
    const std::string port(client.Get("/")["X-Upstream-Port"]);
    EXPECT_NE(port, previous);
    previous = port;
    ++seen[port];
  }
  EXPECT_EQ(seen[std::to_string(one->port())], 5);
  EXPECT_EQ(seen[std::to_string(two->port())], 5);
}

TEST(Upstreams, RefusingServerIsSkippedForFailTimeout) {
  auto live = StartEcho();
  const std::uint16_t dead = DeadPort();
  TestGateway gateway(TwoServers(dead, live->port(), "fail_timeout = \"30s\"\n"), 0);
  // Every request succeeds: the refused connect moves on to the live server.
  for (int i = 0; i < 6; ++i) {
    Client client(gateway.port());
    Response res = client.Get("/");
    EXPECT_EQ(res.result_int(), 200);
    EXPECT_EQ(res["X-Upstream-Port"], std::to_string(live->port()));
  }
  // After fail_timeout the dead server is tried again (and still fails over).
  gateway.clock().Advance(31'000);
  Client client(gateway.port());
  EXPECT_EQ(client.Get("/").result_int(), 200);
}

TEST(Upstreams, AllServersDownIs502) {
  TestGateway gateway(TwoServers(DeadPort(), DeadPort()), 0);
  Client client(gateway.port());
  EXPECT_EQ(client.Get("/").result_int(), 502);
}

}  // namespace
}  // namespace tollgate::testing
