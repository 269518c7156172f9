// A throwaway redis-server for tests: started on a free loopback port with
// no persistence, killed at destruction. Commands go through a synchronous
// hiredis connection. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tollgate::testing {

class RedisServer {
 public:
  explicit RedisServer(std::string password = "");
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  std::uint16_t port() const { return port_; }
  // redis://[:password@]127.0.0.1:port
  std::string url() const;
  // SIGKILL, as a crash would.
  void Kill();
  // Starts again on the same port; returns once it answers.
  void Start();
  // One command; the reply as text ("OK", "1", an error's message, array
  // elements joined by '\n'). Throws std::runtime_error when unreachable.
  std::string Command(const std::vector<std::string>& args);

 private:
  std::string password_;
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace tollgate::testing
