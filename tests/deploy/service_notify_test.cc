// The real binary under a stand-in for systemd's notify socket
// (deploy/tollgate.service has Type=notify): READY=1 once the listeners
// are bound, RELOADING=1 then READY=1 around a SIGHUP reload, STOPPING=1
// when SIGTERM starts the drain.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "tests/gateway/test_support.h"

namespace tollgate::testing {
namespace {

// A unix datagram socket bound at `path`, as systemd's $NOTIFY_SOCKET is.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : fd_(socket(AF_UNIX, SOCK_DGRAM, 0)) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    EXPECT_LT(path.size(), sizeof(address.sun_path));
    std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
    EXPECT_EQ(bind(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
    // A bound on every wait: a message that never comes fails the test.
    timeval timeout{10, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  }
  ~NotifySocket() { close(fd_); }
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;

  // The next datagram; "" after the timeout.
  std::string Receive() {
    char buffer[4096];
    const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
    return n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : "";
  }

 private:
  int fd_;
};

// The environment variable for the children started while it lives.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

TEST(ServiceNotify, ReadyAfterBindReloadingAroundSighupStoppingAtDrain) {
  auto echo = StartEcho();
  TempDir dir;
  const std::string file = dir.Write("tollgate.toml", WithEchoPort(BasicConfig(), echo->port()));
  NotifySocket notify(dir.path() + "/notify");
  ScopedEnv env("NOTIFY_SOCKET", dir.path() + "/notify");
  Process gateway({TOLLGATE_BINARY, "--config", file});

  EXPECT_EQ(notify.Receive(), "READY=1");
  // Ready means serving: the listener's port is known and takes requests.
  const std::uint16_t port = WaitForPort(gateway);
  Client client(port);
  EXPECT_EQ(client.Get("/").result_int(), 200);

  gateway.Signal(SIGHUP);
  EXPECT_EQ(notify.Receive(), "RELOADING=1");
  EXPECT_EQ(notify.Receive(), "READY=1");
  EXPECT_EQ(client.Get("/").result_int(), 200);

  gateway.Signal(SIGTERM);
  EXPECT_EQ(notify.Receive(), "STOPPING=1");
  EXPECT_EQ(gateway.Wait(), 0);
}

}  // namespace
}  // namespace tollgate::testing
