// The real binary: SIGTERM lets an in-flight request finish, then exits 0.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <regex>
#include <thread>
#include <vector>

#include "test_support.h"
#include "tls_config.h"

namespace tollgate::testing {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// The line of stderr that contains `needle` (reading at most 20 lines).
std::string LineWith(Process& process, const std::string& needle) {
  for (int i = 0; i < 20; ++i) {
    std::string line = process.StderrLine();
    if (line.find(needle) != std::string::npos) return line;
  }
  return "";
}

enum class ReloadBy { kSighup, kWatching };

// A broken file is refused with its position and the old rule stays; a good
// one takes effect (a changed limit starts afresh). The window is a day: the
// scenario lasts a few seconds (the watcher looks once a second), and a
// window boundary within it would make the old rule's 429 a 200.
void ReloadScenario(ReloadBy by) {
  auto echo = StartEcho();
  TempDir dir;
  std::string config = BasicConfig(
      "[[rules]]\nname = \"r\"\nkey = \"ip\"\nalgorithm = \"fixed_window\"\nlimit = 1\n"
      "window = \"1d\"\n");
  if (by == ReloadBy::kWatching) {
    config.replace(config.find("[[listeners]]"), 13, "watch_config = true\n[[listeners]]");
  }
  config = WithEchoPort(config, echo->port());
  const std::string file = dir.Write("tollgate.toml", config);
  Process gateway({TOLLGATE_BINARY, "--config", file});
  const std::uint16_t port = WaitForPort(gateway);
  Client client(port);
  EXPECT_EQ(client.Get("/").result_int(), 200);
  EXPECT_EQ(client.Get("/").result_int(), 429);
  const auto changed = [&](const std::string& text) {
    dir.Write("tollgate.toml", text);
    if (by == ReloadBy::kSighup) gateway.Signal(SIGHUP);
  };

  changed(config + "[[rules]]\nname = \"bad\"\nalgorithm = \"nope\"\n");
  EXPECT_NE(LineWith(gateway, "reload:").find("tollgate.toml:"), std::string::npos);
  EXPECT_NE(LineWith(gateway, "reload failed"), "");
  EXPECT_EQ(client.Get("/").result_int(), 429);  // the old rule is still in force

  std::string raised = config;
  raised.replace(raised.find("limit = 1"), 9, "limit = 9");
  changed(raised);
  EXPECT_NE(LineWith(gateway, "is in force"), "");
  EXPECT_EQ(client.Get("/").result_int(), 200);
  gateway.Signal(SIGTERM);
  EXPECT_EQ(gateway.Wait(), 0);
}

TEST(Reload, SighupAppliesAGoodFileAndKeepsTheOldOneOnErrors) { ReloadScenario(ReloadBy::kSighup); }

// No signal: watch_config notices the writes.
TEST(Reload, AWatchedFileIsReloadedWhenItChanges) { ReloadScenario(ReloadBy::kWatching); }

TEST(Drain, InFlightRequestCompletesAfterSigterm) {
  auto echo = StartEcho();
  TempDir dir;
  std::string config = BasicConfig();
  config = WithEchoPort(config, echo->port());
  const std::string file = dir.Write("tollgate.toml", config);
  Process gateway({TOLLGATE_BINARY, "--config", file});
  const std::uint16_t port = WaitForPort(gateway);

  Client idle(port);  // an idle keep-alive connection is closed by the drain
  EXPECT_EQ(idle.Get("/").result_int(), 200);
  auto slow = std::async(std::launch::async, [port] {
    Client client(port);
    return client.Get("/_test/sleep/800");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  gateway.Signal(SIGTERM);
  Response res = slow.get();
  EXPECT_EQ(res.result_int(), 200);
  EXPECT_EQ(res.body(), "slept\n");
  EXPECT_EQ(res[http::field::connection], "close");
  EXPECT_TRUE(idle.ClosedByPeer());
  EXPECT_EQ(gateway.Wait(), 0);
}

// Connections still in the start step (a TLS handshake the client has not
// begun; an h2c-capable listener that has had no byte yet) are closed by a
// drain at once, as idle ones are: they do not hold it up to its timeout.
void DrainWithConnectionsStarting(const std::string& listener_config) {
  auto echo = StartEcho();
  TempDir dir;
  std::string config = WithEchoPort(listener_config, echo->port());
  config.replace(config.find("threads = 1"), 11, "threads = 1\ndrain_timeout = \"30s\"");
  const std::string file = dir.Write("tollgate.toml", config);
  Process gateway({TOLLGATE_BINARY, "--config", file});
  const auto [port, admin_port] = WaitForPorts(gateway);
  asio::io_context io;
  std::vector<tcp::socket> silent;
  for (int i = 0; i < 3; ++i) {
    silent.emplace_back(io).connect({asio::ip::make_address("127.0.0.1"), port});
  }
  // Until the gateway has accepted them (it counts them from then on).
  Client admin(admin_port);
  const auto active = [&] {
    const std::string metrics = admin.Get("/metrics").body();
    const std::size_t at = metrics.find("\ntollgate_active_connections{");
    if (at == std::string::npos) return -1;
    return std::atoi(metrics.c_str() + metrics.find("} ", at) + 2);
  };
  for (int i = 0; i < 1000 && active() < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(active(), 3);
  const auto signalled = std::chrono::steady_clock::now();
  gateway.Signal(SIGTERM);
  EXPECT_EQ(gateway.Wait(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - signalled, std::chrono::seconds(10));
  for (tcp::socket& s : silent) {
    char byte;
    boost::system::error_code ec;
    s.read_some(asio::buffer(&byte, 1), ec);
    EXPECT_EQ(ec, asio::error::eof);  // closed by the gateway, nothing sent
  }
}

TEST(Drain, ConnectionsNotYetSpeakingOnAnH2cListenerDoNotHoldItUp) {
  DrainWithConnectionsStarting(BasicConfig());
}

TEST(Drain, ConnectionsBeforeTheirTlsHandshakeDoNotHoldItUp) {
  TempDir dir;
  auto [cert, key] = MakeCertificate(dir, "localhost");
  DrainWithConnectionsStarting(TlsConfig(TlsTable(cert, key)));
}

}  // namespace
}  // namespace tollgate::testing
