// ws_load: a WebSocket load generator for bench/websocket.sh. One thread, one
// epoll loop (Boost.Beast's websocket client on Asio). It opens N
// connections to HOST:PORT PATH; each sends a binary message of SIZE bytes
// (masked, as RFC 6455 demands of a client), waits for its echo, and
// repeats. Once every handshake is done it runs WARMUP seconds, then counts
// for DURATION seconds, and prints one line of name=value pairs:
//   msgs_per_s p50_us p99_us (round trips completed in the window and their
//   times), messages, open (connections that completed the handshake),
//   failed (handshakes that did not), closed (tunnels that ended during the
//   run, close_codes: the WebSocket close codes seen, code:count), bad
//   (echoes of another size), self_us (this process's CPU per message),
//   machine_cores and self_cores (CPU seconds per second of every process on
//   the machine, from /proc/stat, and of this one: what else ran),
// and for each --pid NAME=PID: NAME_us, NAME_user_us, NAME_sys_us (that
// process's CPU time per message, all threads, from /proc/PID/stat over the
// same window) and NAME_cores (CPU seconds per second).
// Usage: ws_load --target HOST:PORT [--path /] [--connections 64] [--size 64]
//                [--warmup 1] [--duration 5] [--user-header NAME]
//                [--pid NAME=PID]... [--at-start CMD] [--at-end CMD]
// --user-header NAME: connection i sends `NAME: user<i>` with its handshake.
// --at-start, --at-end: shell commands run (and waited for) just before the
// counted window opens and just after it closes, e.g. to switch a profiler
// on and off (`callgrind_control -i on PID`); nothing is sent meanwhile.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bench/ws_common.h"

namespace tollgate::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  tcp::endpoint target;
  std::string host;  // the Host field: the target as given
  std::string path = "/";
  int connections = 64;
  std::size_t size = 64;
  double warmup = 1;
  double duration = 5;
  std::string user_header;
  std::vector<std::pair<std::string, int>> pids;
  std::string at_start;
  std::string at_end;
};

void RunHook(const std::string& command) {
  if (!command.empty() && std::system(command.c_str()) != 0) Die("failed: " + command);
}

// CPU seconds of a process so far, user and system, from /proc/PID/stat
// (every thread, those that ended included).
struct CpuTime {
  double user = 0;
  double sys = 0;
};

CpuTime ReadCpu(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  const auto paren = line.rfind(')');  // the command name may hold spaces
  if (paren == std::string::npos) Die("cannot read /proc/" + std::to_string(pid) + "/stat");
  std::istringstream fields(line.substr(paren + 2));
  std::string field;
  // After the name: state is field 3; utime and stime are fields 14 and 15.
  for (int i = 3; i < 14; ++i) fields >> field;
  double utime = 0;
  double stime = 0;
  fields >> utime >> stime;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  return {utime / tick, stime / tick};
}

// CPU seconds the whole machine spent busy so far (/proc/stat: user, nice,
// system, irq, softirq, steal).
double MachineCpu() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  return (user + nice + system + irq + softirq + steal) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

CpuTime SelfCpu() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return {seconds(usage.ru_utime), seconds(usage.ru_stime)};
}

struct Stats {
  explicit Stats(int connections) : remaining(connections) {}

  int remaining;  // connections still doing their handshake
  int open = 0;
  int failed = 0;
  int closed = 0;
  std::uint64_t bad = 0;
  std::map<int, int> close_codes;
  bool measuring = false;
  bool done = false;
  std::uint64_t messages = 0;
  // Round-trip times in whole microseconds, 1 µs bins; the last one holds
  // everything from 1 s up.
  std::vector<std::uint32_t> histogram = std::vector<std::uint32_t>(1'000'001);
};

double Percentile(const Stats& stats, double p) {
  const auto rank = static_cast<std::uint64_t>(p * static_cast<double>(stats.messages));
  std::uint64_t seen = 0;
  for (std::size_t us = 0; us < stats.histogram.size(); ++us) {
    seen += stats.histogram[us];
    if (seen > rank) return static_cast<double>(us);
  }
  return 0;
}

Task<void> Measure(const Options& options, Stats& stats, asio::io_context& io);

// Called when a connection's handshake has ended either way; the last one
// starts the measurement.
void HandshakeEnded(const Options& options, Stats& stats, asio::io_context& io) {
  if (--stats.remaining == 0) asio::co_spawn(io.get_executor(), Measure(options, stats, io), asio::detached);
}

Task<void> Client(const Options& options, Stats& stats, asio::io_context& io, int index) {
  Socket socket(io.get_executor());
  auto [connect_ec] = co_await socket.async_connect(options.target, kUseTuple);
  WebSocket ws(std::move(socket));
  if (!connect_ec) {
    ws.next_layer().set_option(tcp::no_delay(true));
    ws.auto_fragment(false);
    ws.secure_prng(false);  // masks from a fast generator: they need not be secret here
    ws.binary(true);
    if (!options.user_header.empty()) {
      ws.set_option(websocket::stream_base::decorator(
          [&options, index](websocket::request_type& req) {
            req.set(options.user_header, "user" + std::to_string(index));
          }));
    }
  }
  ErrorCode handshake_ec = connect_ec;
  if (!handshake_ec) std::tie(handshake_ec) = co_await ws.async_handshake(options.host, options.path, kUseTuple);
  if (handshake_ec) {
    if (stats.failed++ == 0) {
      std::fprintf(stderr, "ws_load: handshake failed: %s\n", handshake_ec.message().c_str());
    }
    HandshakeEnded(options, stats, io);
    co_return;
  }
  ++stats.open;
  HandshakeEnded(options, stats, io);
  const std::string payload(options.size, 'x');
  beast::flat_buffer buffer;
  while (!stats.done) {
    const auto start = Clock::now();
    auto [write_ec, written] = co_await ws.async_write(asio::buffer(payload), kUseTuple);
    ErrorCode ec = write_ec;
    if (!ec) std::tie(ec, std::ignore) = co_await ws.async_read(buffer, kUseTuple);
    if (ec) {
      if (stats.done) break;
      ++stats.closed;
      ++stats.close_codes[ec == websocket::error::closed ? static_cast<int>(ws.reason().code) : 0];
      break;
    }
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
    if (buffer.size() != options.size) ++stats.bad;
    buffer.consume(buffer.size());
    if (stats.measuring) {
      ++stats.messages;
      ++stats.histogram[std::min<std::size_t>(static_cast<std::size_t>(us), stats.histogram.size() - 1)];
    }
  }
}

Task<void> Measure(const Options& options, Stats& stats, asio::io_context& io) {
  Timer timer(io.get_executor());
  const auto wait = [&](double seconds) {
    timer.expires_after(std::chrono::microseconds(static_cast<std::int64_t>(seconds * 1e6)));
    return timer.async_wait(kUseTuple);
  };
  co_await wait(options.warmup);
  RunHook(options.at_start);
  std::vector<CpuTime> before;
  for (const auto& [name, pid] : options.pids) before.push_back(ReadCpu(pid));
  const CpuTime self_before = SelfCpu();
  const double machine_before = MachineCpu();
  const auto start = Clock::now();
  stats.measuring = true;
  co_await wait(options.duration);
  stats.measuring = false;
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const CpuTime self_after = SelfCpu();
  const double machine_after = MachineCpu();
  std::vector<CpuTime> after;
  for (const auto& [name, pid] : options.pids) after.push_back(ReadCpu(pid));
  stats.done = true;
  RunHook(options.at_end);

  const double messages = static_cast<double>(std::max<std::uint64_t>(stats.messages, 1));
  const auto per_message_us = [&](double cpu_seconds) { return cpu_seconds * 1e6 / messages; };
  std::printf("msgs_per_s=%.0f p50_us=%.0f p99_us=%.0f messages=%llu open=%d failed=%d closed=%d bad=%llu",
              static_cast<double>(stats.messages) / seconds, Percentile(stats, 0.5),
              Percentile(stats, 0.99), static_cast<unsigned long long>(stats.messages), stats.open,
              stats.failed, stats.closed, static_cast<unsigned long long>(stats.bad));
  std::string codes;
  for (const auto& [code, count] : stats.close_codes) {
    codes += (codes.empty() ? "" : ",") + std::to_string(code) + ":" + std::to_string(count);
  }
  std::printf(" close_codes=%s", codes.empty() ? "-" : codes.c_str());
  const double self_cpu = self_after.user + self_after.sys - self_before.user - self_before.sys;
  std::printf(" self_us=%.2f self_cores=%.2f machine_cores=%.2f", per_message_us(self_cpu),
              self_cpu / seconds, (machine_after - machine_before) / seconds);
  for (std::size_t i = 0; i < options.pids.size(); ++i) {
    const double user = after[i].user - before[i].user;
    const double sys = after[i].sys - before[i].sys;
    const char* name = options.pids[i].first.c_str();
    std::printf(" %s_us=%.2f %s_user_us=%.2f %s_sys_us=%.2f %s_cores=%.2f", name,
                per_message_us(user + sys), name, per_message_us(user), name, per_message_us(sys),
                name, (user + sys) / seconds);
  }
  std::printf("\n");
  std::fflush(stdout);
  io.stop();  // the connections end with the process, without a close handshake
}

Options ParseOptions(int argc, char** argv) {
  Options options;
  bool have_target = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (i + 1 >= argc) Die("missing value after " + std::string(flag));
    const std::string value = argv[++i];
    if (flag == "--target") {
      options.target = ParseEndpoint(value);
      options.host = value;
      have_target = true;
    } else if (flag == "--path") {
      options.path = value;
    } else if (flag == "--connections") {
      options.connections = std::atoi(value.c_str());
    } else if (flag == "--size") {
      options.size = static_cast<std::size_t>(std::atol(value.c_str()));
    } else if (flag == "--warmup") {
      options.warmup = std::atof(value.c_str());
    } else if (flag == "--duration") {
      options.duration = std::atof(value.c_str());
    } else if (flag == "--user-header") {
      options.user_header = value;
    } else if (flag == "--at-start") {
      options.at_start = value;
    } else if (flag == "--at-end") {
      options.at_end = value;
    } else if (flag == "--pid") {
      const auto eq = value.find('=');
      if (eq == std::string::npos) Die("--pid takes NAME=PID");
      options.pids.emplace_back(value.substr(0, eq), std::atoi(value.c_str() + eq + 1));
    } else {
      Die("unknown option " + std::string(flag));
    }
  }
  if (!have_target || options.connections < 1 || options.duration <= 0) {
    Die("usage: ws_load --target HOST:PORT [--path /] [--connections 64] [--size 64] "
        "[--warmup 1] [--duration 5] [--user-header NAME] [--pid NAME=PID]... [--at-start CMD] "
        "[--at-end CMD]");
  }
  return options;
}

}  // namespace
}  // namespace tollgate::bench

int main(int argc, char** argv) {
  using namespace tollgate::bench;
  const Options options = ParseOptions(argc, argv);
  Stats stats(options.connections);
  asio::io_context io(1);
  for (int i = 0; i < options.connections; ++i) {
    asio::co_spawn(io.get_executor(), Client(options, stats, io, i), asio::detached);
  }
  io.run();
  return stats.open > 0 && stats.closed == 0 && stats.bad == 0 ? 0 : 1;
}
