#include "redis_server.h"

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <random>
#include <stdexcept>
#include <thread>

namespace tollgate::testing {
namespace {

// A free port for a redis-server, from 20000-29999: outside the kernel's
// ephemeral range, which every other test's port 0 draws from, so that a
// killed server's port is not handed to someone else before it restarts.
std::uint16_t FreePort() {
  static std::mt19937 random(std::random_device{}());
  for (;;) {
    const auto port = static_cast<std::uint16_t>(20000 + random() % 10000);
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    const bool free = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    close(fd);
    if (free) return port;
  }
}

std::string ReplyText(const redisReply* r) {
  switch (r->type) {
    case REDIS_REPLY_INTEGER:
      return std::to_string(r->integer);
    case REDIS_REPLY_NIL:
      return "";
    case REDIS_REPLY_ARRAY: {
      std::string out;
      for (std::size_t i = 0; i < r->elements; ++i) {
        if (i > 0) out += '\n';
        out += ReplyText(r->element[i]);
      }
      return out;
    }
    default:
      return std::string(r->str, r->len);
  }
}

}  // namespace

RedisServer::RedisServer(std::string password, RedisMode mode)
    : password_(std::move(password)), mode_(mode) {
  port_ = FreePort();
  Start();
}

RedisServer::~RedisServer() {
  Kill();
  if (mode_ == RedisMode::kCluster) unlink(ClusterConfigFile().c_str());
}

std::string RedisServer::ClusterConfigFile() const {
  return "/tmp/tollgate-cluster-" + std::to_string(port_) + ".conf";
}

std::string RedisServer::url() const {
  return "redis://" + (password_.empty() ? "" : ":" + password_ + "@") +
         "127.0.0.1:" + std::to_string(port_);
}

void RedisServer::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void RedisServer::Pause() {
  if (pid_ <= 0) return;
  kill(pid_, SIGSTOP);
  // kill() may return before the server stops (it may be running on the
  // other core): a command sent meanwhile could still be answered.
  int status = 0;
  while (waitpid(pid_, &status, WUNTRACED) == -1 && errno == EINTR) {
  }
  // Died instead (reaped now): nothing left to signal, its pid may be reused.
  if (!WIFSTOPPED(status)) pid_ = -1;
}

void RedisServer::Resume() {
  if (pid_ > 0) kill(pid_, SIGCONT);
}

void RedisServer::Start() {
  std::vector<std::string> argv{
      "redis-server", "--port", std::to_string(port_),    "--bind", "127.0.0.1", "--save", "",
      "--appendonly", "no",     "--enable-debug-command", "yes"};
  if (!password_.empty()) {
    argv.push_back("--requirepass");
    argv.push_back(password_);
  }
  if (mode_ == RedisMode::kCluster) {
    const std::string conf = ClusterConfigFile();
    unlink(conf.c_str());
    // The bus port is port + 10000 unless set: past 65535 for high ports.
    for (const char* a :
         {"--cluster-enabled", "yes", "--cluster-node-timeout", "5000", "--cluster-port"}) {
      argv.push_back(a);
    }
    if (cluster_port_ == 0) cluster_port_ = FreePort();
    argv.push_back(std::to_string(cluster_port_));
    argv.push_back("--cluster-config-file");
    argv.push_back(conf);
  }
  const pid_t test = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    // The server goes with the test, even one that aborts (a sanitizer's
    // report): an orphan would keep ctest's output pipe open until timeout.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != test) _exit(127);
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      if (Command({"PING"}) == "PONG") return;
    } catch (const std::runtime_error&) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  throw std::runtime_error("redis-server did not start on port " + std::to_string(port_));
}

std::string RedisServer::Command(const std::vector<std::string>& args) {
  const timeval timeout{5, 0};
  std::unique_ptr<redisContext, decltype(&redisFree)> c(
      redisConnectWithTimeout("127.0.0.1", port_, timeout), &redisFree);
  if (!c || c->err) throw std::runtime_error("cannot connect to redis");
  auto run = [&](const std::vector<std::string>& command) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const std::string& a : command) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    std::unique_ptr<redisReply, void (*)(void*)> reply(
        static_cast<redisReply*>(
            redisCommandArgv(c.get(), static_cast<int>(argv.size()), argv.data(), lens.data())),
        &freeReplyObject);
    if (!reply) throw std::runtime_error("redis connection lost");
    return ReplyText(reply.get());
  };
  if (!password_.empty()) run({"AUTH", password_});
  return run(args);
}

RedisCluster::RedisCluster() {
  // `timeout`: redis-cli waits for ever for a node that never joins.
  std::string command = "timeout 30 redis-cli --cluster create";
  for (int i = 0; i < 3; ++i) {
    nodes_.push_back(std::make_unique<RedisServer>("", RedisMode::kCluster));
    command += " 127.0.0.1:" + std::to_string(nodes_.back()->port());
  }
  command += " --cluster-replicas 0 --cluster-yes >/dev/null 2>&1";
  if (std::system(command.c_str()) != 0) throw std::runtime_error("redis-cli --cluster create");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (auto& node : nodes_) {
    while (node->Command({"CLUSTER", "INFO"}).find("cluster_state:ok") == std::string::npos) {
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("the cluster did not become ready");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

std::string RedisCluster::seed() const { return "127.0.0.1:" + std::to_string(nodes_[0]->port()); }

std::size_t RedisCluster::OwnerOf(const std::string& key) {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const std::string answer = nodes_[i]->Command({"TYPE", key});
    if (answer.rfind("MOVED", 0) != 0 && answer.rfind("ASK", 0) != 0) return i;
  }
  throw std::runtime_error("no node owns " + key);
}

void RedisCluster::MoveSlot(int slot, std::size_t from, std::size_t to, int pause_ms) {
  RedisServer& src = *nodes_[from];
  RedisServer& dst = *nodes_[to];
  const std::string src_id = src.Command({"CLUSTER", "MYID"});
  const std::string dst_id = dst.Command({"CLUSTER", "MYID"});
  const std::string s = std::to_string(slot);
  dst.Command({"CLUSTER", "SETSLOT", s, "IMPORTING", src_id});
  src.Command({"CLUSTER", "SETSLOT", s, "MIGRATING", dst_id});
  for (;;) {
    const std::string keys = src.Command({"CLUSTER", "GETKEYSINSLOT", s, "1"});
    if (keys.empty()) break;
    src.Command({"MIGRATE", "127.0.0.1", std::to_string(dst.port()), keys, "0", "5000"});
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
  }
  src.Command({"CLUSTER", "SETSLOT", s, "NODE", dst_id});
  std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
  for (auto& node : nodes_) {
    if (node.get() != &src) node->Command({"CLUSTER", "SETSLOT", s, "NODE", dst_id});
  }
}

}  // namespace tollgate::testing
