#include "test_support.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/json.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>

#include "rules/config.h"

namespace tollgate::testing {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

TempDir::TempDir() {
  std::random_device rd;
  path_ =
      (std::filesystem::temp_directory_path() / ("tollgate-test-" + std::to_string(rd()))).string();
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::Write(const std::string& name, const std::string& content) const {
  const std::string file = path_ + "/" + name;
  std::ofstream(file) << content;
  return file;
}

std::pair<std::string, std::string> MakeCertificate(const TempDir& dir, const std::string& name) {
  const std::string cert = dir.path() + "/" + name + ".crt";
  const std::string key = dir.path() + "/" + name + ".key";
  const std::string cmd =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
      "-subj /CN=" +
      name + " -addext 'subjectAltName=DNS:" + name + ",DNS:localhost,IP:127.0.0.1' -keyout " +
      key + " -out " + cert + " >/dev/null 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return {cert, key};
}

std::unique_ptr<gateway::EchoUpstream> StartEcho() {
  std::string error;
  auto echo = gateway::EchoUpstream::Create("127.0.0.1", 0, 1, error);
  EXPECT_NE(echo, nullptr) << error;
  echo->Start();
  return echo;
}

std::string BasicConfig(const std::string& extra) {
  return R"(
[server]
threads = 1
[[listeners]]
address = "127.0.0.1:0"
[admin]
address = "127.0.0.1:0"
[log]
access = "off"
[[upstreams]]
name = "api"
servers = ["127.0.0.1:{ECHO}"]
[[routes]]
path_prefix = "/"
upstream = "api"
)" + extra;
}

std::string RedisStoreSection(const std::string& where, const std::string& on_error,
                              const std::string& timeout, const std::string& more) {
  return "[store]\nkind = \"redis\"\n[store.redis]\n" + where + "\ntimeout = \"" + timeout +
         "\"\non_error = \"" + on_error + "\"\n" + more;
}

std::string WithEchoPort(std::string toml, std::uint16_t port) {
  for (std::size_t at; (at = toml.find("{ECHO}")) != std::string::npos;) {
    toml.replace(at, 6, std::to_string(port));
  }
  return toml;
}

TestGateway::TestGateway(std::string toml, std::uint16_t echo_port, TestClock clock) {
  rules::LoadResult loaded =
      rules::LoadConfigText(WithEchoPort(std::move(toml), echo_port), "test.toml");
  for (const auto& e : loaded.errors) ADD_FAILURE() << e.ToString();
  if (!loaded.config) std::abort();
  std::string error;
  const store::Clock& chosen =
      clock == TestClock::kSteady ? static_cast<const store::Clock&>(steady_) : clock_;
  server_ =
      gateway::Server::Create(std::make_shared<const rules::Config>(*loaded.config), chosen, error);
  if (!server_) {
    ADD_FAILURE() << error;
    std::abort();
  }
  server_->Start();
}

TestGateway::TestGateway(const rules::Config& config) {
  std::string error;
  server_ = gateway::Server::Create(std::make_shared<const rules::Config>(config), clock_, error);
  if (!server_) {
    ADD_FAILURE() << error;
    std::abort();
  }
  server_->Start();
}

TestGateway::~TestGateway() {
  server_->Stop();
  server_->Wait();
}

Client::Client(std::uint16_t port, int timeout_ms, const std::string& source) : socket_(io_) {
  socket_.open(tcp::v4());
  socket_.bind(tcp::endpoint(asio::ip::make_address(source), 0));
  socket_.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

void Client::Send(const std::string& raw) { asio::write(socket_, asio::buffer(raw)); }

Response Client::Read(bool head_request) {
  http::response_parser<http::string_body> parser;
  parser.body_limit(boost::none);
  if (head_request) parser.skip(true);
  boost::system::error_code ec;
  http::read(socket_, buffer_, parser, ec);
  EXPECT_FALSE(ec) << ec.message();
  return parser.release();
}

Response Client::Get(const std::string& target, const std::string& extra_headers) {
  Send("GET " + target + " HTTP/1.1\r\nHost: test\r\n" + extra_headers + "\r\n");
  return Read();
}

std::string Client::ReadToClose() {
  std::string out(static_cast<const char*>(buffer_.data().data()), buffer_.size());
  buffer_.consume(buffer_.size());
  char chunk[4096];
  for (;;) {
    boost::system::error_code ec;
    const std::size_t n = socket_.read_some(asio::buffer(chunk), ec);
    if (ec) break;
    out.append(chunk, n);
  }
  return out;
}

bool Client::ClosedByPeer() {
  char c;
  boost::system::error_code ec;
  socket_.read_some(asio::buffer(&c, 1), ec);
  return ec == asio::error::eof || ec == asio::error::connection_reset;
}

Process::Process(std::vector<std::string> argv) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t test = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    // Gone with the test, even one that aborts (see RedisServer::Start).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != test) _exit(127);
    dup2(fds[1], 2);
    close(fds[0]);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  err_ = fdopen(fds[0], "r");
}

Process::~Process() {
  if (pid_ > 0 && !exited_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (err_ != nullptr) fclose(err_);
}

std::string Process::StderrLine() {
  char line[1024];
  if (fgets(line, sizeof(line), err_) == nullptr) return "";
  return line;
}

void Process::Signal(int sig) { kill(pid_, sig); }

int Process::Wait() {
  int status = 0;
  waitpid(pid_, &status, 0);
  exited_ = true;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string Shell(const std::string& command) {
  std::string out;
  const int rc = RunCommand("(" + command + ") 2>&1", "", out);
  EXPECT_EQ(rc, 0) << command << ": " << out;
  return out;
}

std::string ShellWhile(const std::string& command,
                       const std::function<void(const std::string&)>& on_line) {
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) {
    ADD_FAILURE() << "cannot run " << command;
    return "";
  }
  std::string out;
  char line[4096];
  while (fgets(line, sizeof line, p) != nullptr) {
    out += line;
    on_line(line);
  }
  EXPECT_EQ(pclose(p), 0) << command << ": " << out;
  return out;
}

WebSocketEcho::WebSocketEcho(const std::string& script, const std::vector<std::string>& args)
    : process_(Argv(script, args)) {
  const std::string line = process_.StderrLine();
  std::smatch match;
  if (std::regex_search(line, match, std::regex("port (\\d+)"))) {
    port_ = static_cast<std::uint16_t>(std::stoi(match[1]));
  }
  EXPECT_NE(port_, 0) << line;
}

std::vector<std::string> WebSocketEcho::Argv(const std::string& script,
                                             const std::vector<std::string>& args) {
  std::vector<std::string> argv{"/usr/bin/python3", script};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

PortPeer::PortPeer(std::vector<std::string> argv)
    : stats_(dir_.path() + "/stats.json"), process_(WithStats(std::move(argv), stats_)) {
  const std::string line = process_.StderrLine();
  EXPECT_EQ(line.rfind("port=", 0), 0u) << line;
  port_ = static_cast<std::uint16_t>(std::atoi(line.c_str() + 5));
}

std::vector<std::string> PortPeer::WithStats(std::vector<std::string> argv,
                                             const std::string& stats) {
  for (auto& arg : argv) {
    if (arg == "{STATS}") arg = stats;
  }
  return argv;
}

std::int64_t PortPeer::Stat(const std::string& key) const {
  std::ifstream in(stats_);
  std::stringstream text;
  text << in.rdbuf();
  const boost::json::object stats = boost::json::parse(text.str()).as_object();
  const auto* value = stats.if_contains(key);
  return value == nullptr ? 0 : value->as_int64();
}

std::uint16_t WaitForPort(Process& gateway) { return WaitForPorts(gateway).first; }

std::pair<std::uint16_t, std::uint16_t> WaitForPorts(Process& gateway) {
  std::smatch match;
  std::string line;
  const std::regex serving("port\\(s\\) ([0-9]+).*admin on port ([0-9]+)");
  for (int i = 0; i < 10 && !std::regex_search(line, match, serving); ++i) {
    line = gateway.StderrLine();
  }
  EXPECT_TRUE(std::regex_search(line, match, serving)) << line;
  if (match.size() < 3) return {0, 0};
  return {static_cast<std::uint16_t>(std::stoi(match[1])),
          static_cast<std::uint16_t>(std::stoi(match[2]))};
}

int RunCommand(const std::string& command, const std::string& input, std::string& out) {
  TempDir dir;
  const std::string file = dir.Write("stdin", input);
  FILE* p = popen((command + " < " + file + " 2>&1").c_str(), "r");
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  return WEXITSTATUS(status);
}

}  // namespace tollgate::testing
