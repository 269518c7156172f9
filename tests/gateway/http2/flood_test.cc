// Misbehaving HTTP/2 clients against a tollgate process (the real binary,
// so that /proc/PID/status is the gateway's alone) in front of the echo
// upstream: the floods of docs/http2-grpc.md (python3-h2 raw frames,
// h2_peer.py) and a client that never opens its stream window
// (h2_gateway_peer.py), each while other clients (h2load, curl) are served
// on connections of their own by the same worker thread.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include <unistd.h>

#include "gateway/http2/connection.h"
#include "tests/gateway/test_support.h"

namespace tollgate::testing {
namespace {

const std::string kPython = "/usr/bin/python3";
const std::string kScripts = TOLLGATE_HTTP2_SCRIPTS;
constexpr std::int64_t kMiB = 1024;  // in the KiB of /proc/PID/status

// A tollgate process with one thread (attacker and witnesses share its
// event loop) and `extra` appended to its configuration.
class Gateway {
 public:
  Gateway(const TempDir& dir, std::uint16_t echo_port, const std::string& extra = "")
      : process_({TOLLGATE_BINARY, "--config",
                  dir.Write("tollgate.toml", WithEchoPort(BasicConfig(extra), echo_port))}),
        port_(WaitForPort(process_)) {}
  std::uint16_t port() const { return port_; }
  int pid() const { return process_.pid(); }
  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

 private:
  Process process_;
  std::uint16_t port_;
};

// `field` (VmRSS, VmHWM) of /proc/PID/status in KiB; -1 if absent.
std::int64_t StatusKiB(int pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1));
  }
  return -1;
}

// Makes VmHWM the current RSS (Linux 4.0+), so that VmHWM afterwards is
// the peak of what follows. Where that is refused VmHWM is the peak since
// the gateway started, which only makes the check stricter.
void ResetPeak(int pid) {
  std::ofstream("/proc/" + std::to_string(pid) + "/clear_refs") << "5";
}

// Runs `script` `scenario` against `port` with `env` before it, calling
// `on_line` with each line it prints as it prints it.
std::string PeerWhile(const std::string& script, const std::string& scenario, std::uint16_t port,
                      const std::string& env,
                      const std::function<void(const std::string&)>& on_line) {
  return ShellWhile(env + " " + kPython + " " + kScripts + "/" + script + " " + scenario + " " +
                        std::to_string(port) + " 2>&1",
                    on_line);
}

// A client on connections of its own, run in a thread while the peer goes
// on: 300 HTTP/2 requests, 10 at once on each of 3 connections.
class Witness {
 public:
  explicit Witness(const Gateway& gateway)
      : thread_([this, url = gateway.Url("/api/hello")] {
          RunCommand("h2load -n 300 -c 3 -m 10 " + url, "", out_);
        }) {}
  ~Witness() {
    if (thread_.joinable()) thread_.join();
  }
  // Waits for it; what h2load printed.
  std::string Join() {
    thread_.join();
    return out_;
  }

 private:
  std::string out_;
  std::thread thread_;
};

constexpr const char* kAllServed = "status codes: 300 2xx, 0 3xx, 0 4xx, 0 5xx";

// Each flood ends in GOAWAY ENHANCE_YOUR_CALM (11) after bounded work: the
// gateway's peak RSS stays within 64 MiB of where it was, and h2load,
// started mid-flood (the attacker pauses once, after its first frames, for
// it to start), has every request answered.
class Http2GatewayFlood : public ::testing::TestWithParam<const char*> {};

TEST_P(Http2GatewayFlood, EndsWithEnhanceYourCalmWhileOthersAreServed) {
  TempDir dir;
  auto echo = StartEcho();
  Gateway gateway(dir, echo->port());
  const std::string started = dir.path() + "/witness";
  const std::int64_t before = StatusKiB(gateway.pid(), "VmRSS");
  ASSERT_GT(before, 0);
  ResetPeak(gateway.pid());
  std::unique_ptr<Witness> witness;
  const std::string out = PeerWhile("h2_peer.py", GetParam(), gateway.port(),
                                    "WITNESS=" + started, [&](const std::string& line) {
                                      if (line != "flooding\n" || witness) return;
                                      witness = std::make_unique<Witness>(gateway);
                                      dir.Write("witness", "");
                                    });
  ASSERT_TRUE(witness) << "the flood never paused for the witness: " << out;
  const std::string served = witness->Join();
  std::smatch goaway;
  ASSERT_TRUE(std::regex_search(out, goaway, std::regex("goaway=([0-9]+) last_stream=([0-9]+)")))
      << out;
  EXPECT_EQ(goaway[1], "11") << out;
  EXPECT_NE(served.find(kAllServed), std::string::npos) << served;
  const std::int64_t peak = StatusKiB(gateway.pid(), "VmHWM");
  EXPECT_LT(peak - before, 64 * kMiB) << "VmRSS " << before << " KiB before, peak " << peak;
  if (std::string(GetParam()) == "hpack-bomb") {
    // Stream 1 stores the value, each later one is a bomb: the GOAWAY
    // comes with the one after max_oversized_headers of them.
    const int limit = static_cast<int>(gateway::Http2Options{}.max_oversized_headers);
    EXPECT_LE(std::stoi(goaway[2]), 1 + 2 * (limit + 1)) << out;
  }
  if (std::string(GetParam()) == "rapid-reset") {
    // Every HEADERS+RST_STREAM pair takes a token of the reset budget; the
    // GOAWAY names the last stream the gateway took, so at most about
    // reset_burst streams were looked at (twice that is the bound here:
    // the budget refills while the attacker waits for the witness).
    const int last_stream = std::stoi(goaway[2]);
    EXPECT_LT(last_stream, 4 * static_cast<int>(gateway::Http2Options{}.reset_burst)) << out;
  }
  // The gateway goes on serving new connections.
  EXPECT_EQ(Shell("curl -sS --http2-prior-knowledge " + gateway.Url("/api/hello")),
            "hello from upstream\n");
}

INSTANTIATE_TEST_SUITE_P(Floods, Http2GatewayFlood,
                         ::testing::Values("rapid-reset", "continuation-flood", "settings-flood",
                                           "ping-flood", "empty-data-flood", "hpack-bomb"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::erase(name, '-');
                           return name;
                         });

// CPU seconds (user and system) process `pid` has used, from
// /proc/PID/stat.
double CpuSeconds(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string field;
  std::int64_t ticks = 0;
  // After the command: state is field 3, utime 14, stime 15.
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i >= 14) ticks += std::stoll(field);
  }
  return static_cast<double>(ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Eight HPACK-bomb connections at once (each block about 64 MB of decoded
// fields): each ends after a few blocks, and the fields past
// max_header_bytes are neither checked nor kept, so that the gateway's CPU
// time for all of them stays small (bench/RESULTS.md has the cost of a
// block before and after).
TEST(Http2GatewayFlood, HpackBombsCostLittleWork) {
  TempDir dir;
  auto echo = StartEcho();
  Gateway gateway(dir, echo->port());
  const double before = CpuSeconds(gateway.pid());
  const std::string peer = kPython + " " + kScripts + "/h2_peer.py hpack-bomb " +
                           std::to_string(gateway.port());
  const std::string out = Shell("for i in 1 2 3 4 5 6 7 8; do " + peer + " & done; wait");
  const double used = CpuSeconds(gateway.pid()) - before;
  std::size_t goaways = 0;
  for (std::size_t at = 0; (at = out.find("goaway=11 ", at)) != std::string::npos; ++at) {
    ++goaways;
  }
  EXPECT_EQ(goaways, 8u) << out;
  EXPECT_LT(used, 0.3) << "CPU seconds: " << used << "\n" << out;
  EXPECT_EQ(Shell("curl -sS --http2-prior-knowledge " + gateway.Url("/api/hello")),
            "hello from upstream\n");
}

// A client that never opens a stream's window (SETTINGS_INITIAL_WINDOW_SIZE
// 0, no WINDOW_UPDATE) on a response with a body: the stream is reset
// (CANCEL) at client_body, while another stream of the same connection
// whose window it opens, and other clients meanwhile, are answered.
TEST(Http2GatewayStall, ZeroWindowStreamIsResetAtClientBody) {
  TempDir dir;
  auto echo = StartEcho();
  Gateway gateway(dir, echo->port(), "[timeouts]\nclient_body = \"300ms\"\n");
  std::string others;
  const std::string out =
      PeerWhile("h2_gateway_peer.py", "zero-window", gateway.port(), "",
                [&](const std::string& line) {
                  if (line != "stalled\n") return;
                  others = Shell("h2load -n 100 -c 2 -m 10 " + gateway.Url("/api/hello")) +
                           Shell("curl -sS --http1.1 " + gateway.Url("/api/hello"));
                });
  EXPECT_NE(out.find("stalled_reset=8"), std::string::npos) << out;
  EXPECT_NE(others.find("status codes: 100 2xx, 0 3xx, 0 4xx, 0 5xx"), std::string::npos)
      << others;
  EXPECT_NE(others.find("hello from upstream\n"), std::string::npos) << others;
}

// Open descriptors of process `pid`.
int Descriptors(int pid) {
  int n = 0;
  for ([[maybe_unused]] const auto& entry :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    ++n;
  }
  return n;
}

// A client with every window shut asking for 1 MB on 100 streams: at most
// max_stalled_streams of them wait on the window (each holding an upstream
// connection), the others are reset at once; the gateway holds that many
// more descriptors, and h2load is served meanwhile.
TEST(Http2GatewayStall, ZeroWindowStreamsHoldBoundedUpstreamConnections) {
  TempDir dir;
  auto echo = StartEcho();
  Gateway gateway(dir, echo->port());
  const int before = Descriptors(gateway.pid());
  const int cap = static_cast<int>(gateway::Http2Options{}.max_stalled_streams);
  int during = 0;
  std::string served;
  const std::string release = dir.path() + "/release";
  const std::string out = PeerWhile(
      "h2_gateway_peer.py", "zero-window-many", gateway.port(),
      "RELEASE=" + release + " HELD_AT_MOST=" + std::to_string(cap),
      [&](const std::string& line) {
        if (line.rfind("stalled ", 0) != 0) return;
        during = Descriptors(gateway.pid());
        served = Shell("h2load -n 100 -c 2 -m 10 " + gateway.Url("/api/hello"));
        dir.Write("release", "");
      });
  std::smatch held;
  ASSERT_TRUE(std::regex_search(out, held, std::regex("held=([0-9]+) reset=([0-9]+)"))) << out;
  EXPECT_LE(std::stoi(held[1]), cap) << out;
  // One client connection, its upstream connections, and a few spare
  // (the echo pool's idle ones).
  EXPECT_LE(during - before, cap + 8) << "descriptors " << before << " before, " << during;
  EXPECT_NE(served.find("status codes: 100 2xx, 0 3xx, 0 4xx, 0 5xx"), std::string::npos)
      << served;
}

}  // namespace
}  // namespace tollgate::testing
