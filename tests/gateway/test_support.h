// Helpers for gateway tests over real loopback sockets: an in-process
// gateway and echo upstream on free ports, and a blocking HTTP client.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gateway/server.h"
#include "gateway/tools/echo_upstream.h"
#include "rules/config.h"
#include "base/clock.h"

namespace tollgate::testing {

namespace http = boost::beast::http;
using Response = http::response<http::string_body>;

// A temporary directory removed at destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string Write(const std::string& name, const std::string& content) const;

 private:
  std::string path_;
};

// Self-signed certificate for `name` (also valid for localhost/127.0.0.1),
// made with the openssl CLI. Returns {cert, key} paths.
std::pair<std::string, std::string> MakeCertificate(const TempDir& dir, const std::string& name);

std::unique_ptr<gateway::EchoUpstream> StartEcho();

enum class TestClock { kManual, kSteady };

// A gateway built from TOML text; "{ECHO}" is replaced by `echo_port`. Its
// clock is a ManualClock unless kSteady is asked for (real timers: delays).
class TestGateway {
 public:
  TestGateway(std::string toml, std::uint16_t echo_port, TestClock clock = TestClock::kManual);
  explicit TestGateway(const rules::Config& config);
  ~TestGateway();
  std::uint16_t port(std::size_t listener = 0) const { return server_->listener_ports()[listener]; }
  std::uint16_t admin_port() const { return server_->admin_port(); }
  gateway::Server& server() { return *server_; }
  store::ManualClock& clock() { return clock_; }

 private:
  store::ManualClock clock_{1'000'000};
  store::SteadyClock steady_;
  std::unique_ptr<gateway::Server> server_;
};

// `toml` with every "{ECHO}" replaced by `port` (the echo upstream's, or
// any port for a configuration that is only loaded).
std::string WithEchoPort(std::string toml, std::uint16_t port);

// Minimal proxy config: one plain listener on a free port, no access log,
// one upstream "api" = the echo server, route "/" to it. `extra` is appended.
std::string BasicConfig(const std::string& extra = "");

// [store] on Redis: `where` is `url = "..."` or `nodes = [...]`; `more` is
// appended to [store.redis].
std::string RedisStoreSection(const std::string& where, const std::string& on_error,
                              const std::string& timeout, const std::string& more = "");

// A blocking client connection. Its receive timeout (SO_RCVTIMEO) bounds raw
// recv() calls; Asio's own blocking reads poll without a timeout.
class Client {
 public:
  // `source` binds the client's end (any 127.x.y.z works on Linux).
  explicit Client(std::uint16_t port, int timeout_ms = 5000,
                  const std::string& source = "127.0.0.1");
  void Send(const std::string& raw);
  Response Read(bool head_request = false);
  Response Get(const std::string& target, const std::string& extra_headers = "");
  // Everything until the peer closes (or the timeout).
  std::string ReadToClose();
  bool ClosedByPeer();
  boost::asio::ip::tcp::socket& socket() { return socket_; }
  boost::beast::flat_buffer& buffer() { return buffer_; }

 private:
  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket socket_;
  boost::beast::flat_buffer buffer_;
};

// A child process (e.g. the real tollgate binary) whose stderr can be read
// line by line. Killed at destruction unless waited for.
class Process {
 public:
  explicit Process(std::vector<std::string> argv);
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  std::string StderrLine();  // "" at end of file
  int pid() const { return pid_; }
  void Signal(int sig);
  int Wait();  // exit code, or 128 + signal

 private:
  int pid_ = -1;
  FILE* err_ = nullptr;
  bool exited_ = false;
};

// Runs `command` through the shell with `input` on stdin; returns its exit
// code, with its standard output and error in `out`.
int RunCommand(const std::string& command, const std::string& input, std::string& out);

// Runs `command` through the shell and returns its standard output and
// error; fails the test unless it exits 0.
std::string Shell(const std::string& command);

// Runs `command` through the shell and calls `on_line` with each line of
// its standard output as it comes (add 2>&1 for its errors too); returns
// everything printed. Fails the test unless it exits 0.
std::string ShellWhile(const std::string& command,
                       const std::function<void(const std::string&)>& on_line);

// Reads the gateway's stderr until "serving on port(s) N": returns N.
std::uint16_t WaitForPort(Process& gateway);
// The same line's first listener port and admin port ("admin on port M").
std::pair<std::uint16_t, std::uint16_t> WaitForPorts(Process& gateway);

// tests/gateway/websocket_echo.py (at `script`) on a free port, run with
// Debian's python3; `args` are its own (--deflate).
class WebSocketEcho {
 public:
  explicit WebSocketEcho(const std::string& script, const std::vector<std::string>& args = {});
  std::uint16_t port() const { return port_; }

 private:
  static std::vector<std::string> Argv(const std::string& script,
                                       const std::vector<std::string>& args);

  Process process_;
  std::uint16_t port_ = 0;
};

// A peer (tests/gateway/http2/*.py) that prints "port=N" as its first line
// on stderr and writes its counters into a file as a JSON object: "{STATS}"
// in `argv` is replaced by that file's path.
class PortPeer {
 public:
  explicit PortPeer(std::vector<std::string> argv);
  std::uint16_t port() const { return port_; }
  // The counter `key`; 0 while the peer has not counted it.
  std::int64_t Stat(const std::string& key) const;

 private:
  static std::vector<std::string> WithStats(std::vector<std::string> argv,
                                            const std::string& stats);

  TempDir dir_;
  std::string stats_;
  Process process_;
  std::uint16_t port_ = 0;
};

}  // namespace tollgate::testing
