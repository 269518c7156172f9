// Many idle connections of each kind against the real tollgate binary
// (issue 48): bench/idle_clients.py opens them, makes one exchange on each
// and leaves them idle, then makes one more on every one of them (all must
// be served), and reports the gateway process's resident memory growth
// divided by the connections. Each kind's growth must stay under a
// generous bound: a regression guard for the memory an idle connection
// holds, not a benchmark (bench/idle_memory.sh is, against nginx). No
// timings are asserted.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <map>
#include <ostream>
#include <regex>
#include <sstream>
#include <string>

#include "test_support.h"

namespace tollgate::testing {
namespace {

const std::string kPython = "/usr/bin/python3";  // Debian's python3-h2
const std::string kIdleClients = std::string(TOLLGATE_BENCH_DIR) + "/idle_clients.py";
const std::string kWebSocketEcho = std::string(TOLLGATE_WEBSOCKET_SCRIPTS) + "/websocket_echo.py";

enum class Listener { kPlain, kTls };
enum class Upstream { kHttp, kWebSocket };

struct Kind {
  const char* name;  // idle_clients.py's --kind
  Listener listener;
  Upstream upstream;
  // Resident bytes one idle connection may add to the gateway, at most.
  double bound_bytes;
};

void PrintTo(const Kind& kind, std::ostream* os) { *os << kind.name; }

// Each bound is about 1.25 times what the kind measured when it was set
// (bench/RESULTS.md, "Memory per idle connection"): enough for the spread
// of runs, not for a per-connection buffer coming back (an idle HTTP/1.1
// connection held a 16 KiB read buffer, a page or two of it resident; a
// WebSocket tunnel one per direction; an idle HTTPS connection OpenSSL's
// read buffer).
const Kind kKinds[] = {
    {"http1", Listener::kPlain, Upstream::kHttp, 4 * 1024},
    {"https", Listener::kTls, Upstream::kHttp, 24 * 1024},
    {"h2c", Listener::kPlain, Upstream::kHttp, 28 * 1024},
    {"h2", Listener::kTls, Upstream::kHttp, 48 * 1024},
    {"ws", Listener::kPlain, Upstream::kWebSocket, 14 * 1024},
};

// A sanitizer's allocator puts redzones and a quarantine (ASan) or shadow
// memory (TSan) around every allocation: the gateway's resident memory then
// says nothing about what a connection holds, and only `served` is checked.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kMemoryBounded = false;
#else
constexpr bool kMemoryBounded = true;
#endif

// Connections per kind: a few thousand (a thousand over TLS, whose
// handshakes take the Python client longer), within the descriptor limit
// (the gateway holds two per WebSocket tunnel, the client and the echo one
// each).
std::size_t ConnectionsAllowed(Listener listener) {
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  // The children (gateway, echo, client) inherit the raised soft limit.
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
  getrlimit(RLIMIT_NOFILE, &limit);
  const rlim_t usable = limit.rlim_cur > 256 ? (limit.rlim_cur - 256) / 2 : 0;
  return static_cast<std::size_t>(
      std::min<rlim_t>(listener == Listener::kTls ? 1000 : 2000, usable));
}

// idle_clients.py's output line as name -> value.
std::map<std::string, double> Fields(const std::string& out) {
  std::map<std::string, double> fields;
  static const std::regex kField("([a-z_0-9]+)=([0-9.]+)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), kField); it != std::sregex_iterator();
       ++it) {
    fields[(*it)[1]] = std::stod((*it)[2]);
  }
  return fields;
}

class IdleMemory : public ::testing::TestWithParam<Kind> {};

TEST_P(IdleMemory, EveryIdleConnectionIsServedAndHoldsLittle) {
  const Kind& kind = GetParam();
  const std::size_t count = ConnectionsAllowed(kind.listener);
  if (count < 500) GTEST_SKIP() << "descriptor limit too low for " << count << " connections";

  std::unique_ptr<gateway::EchoUpstream> http_echo;
  std::unique_ptr<WebSocketEcho> ws_echo;
  std::uint16_t upstream_port = 0;
  if (kind.upstream == Upstream::kHttp) {
    http_echo = StartEcho();
    upstream_port = http_echo->port();
  } else {
    ws_echo = std::make_unique<WebSocketEcho>(kWebSocketEcho);
    upstream_port = ws_echo->port();
  }
  TempDir dir;
  std::string config = BasicConfig("[timeouts]\nclient_idle = \"300s\"\n");
  if (kind.listener == Listener::kTls) {
    const auto [cert, key] = MakeCertificate(dir, "localhost");
    const std::string listener = "address = \"127.0.0.1:0\"\n";
    config.replace(config.find(listener), listener.size(),
                   listener + "tls = { cert = \"" + cert + "\", key = \"" + key + "\" }\n");
  }
  const std::string file = dir.Write("tollgate.toml", WithEchoPort(config, upstream_port));
  Process gateway({TOLLGATE_BINARY, "--config", file});
  const std::uint16_t port = WaitForPort(gateway);

  std::ostringstream command;
  command << kPython << " " << kIdleClients << " --kind " << kind.name << " --port " << port
          << " --pid " << gateway.pid() << " --count " << count
          << " --idle 0.3 --settle 0.2 --sample 1";
  std::string out;
  ASSERT_EQ(RunCommand(command.str(), "", out), 0) << out;
  const std::map<std::string, double> fields = Fields(out);
  ASSERT_TRUE(fields.contains("served") && fields.contains("bytes_per_connection")) << out;
  EXPECT_EQ(fields.at("served"), static_cast<double>(count)) << out;
  if (kMemoryBounded) EXPECT_LE(fields.at("bytes_per_connection"), kind.bound_bytes) << out;
  std::printf("%s: %s", kind.name, out.c_str());
}

INSTANTIATE_TEST_SUITE_P(Kinds, IdleMemory, ::testing::ValuesIn(kKinds),
                         [](const ::testing::TestParamInfo<Kind>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace tollgate::testing
