// The gateway process core: one worker thread per configured thread, each
// with its own io_context and SO_REUSEPORT acceptors for every listener, plus
// the admin listener on the first worker. Create() binds everything (so
// configuration errors surface before serving); Start() serves.
// Drain(), Stop() and the accessors are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rules/config.h"
#include "base/clock.h"

namespace tollgate::gateway {

// The version in build_info and --version.
inline constexpr const char* kVersion = TOLLGATE_VERSION;

class Server {
 public:
  // nullptr with `error` set when an address cannot be bound, an upstream
  // resolved, a certificate or the access log opened.
  static std::unique_ptr<Server> Create(std::shared_ptr<const rules::Config> config,
                                        const store::Clock& clock, std::string& error);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  void Start();
  // Puts `config` in force for new exchanges (in-flight ones finish under
  // the old one); rate-limit state of unchanged rules is kept. Listeners,
  // threads, the admin address, the access log and the store's size are
  // fixed at startup. false with `error` set: the running configuration
  // stays.
  bool Reload(std::shared_ptr<const rules::Config> config, std::string& error);
  // Counts a reload that failed before reaching Reload() (a file that does
  // not load), for tollgate_config_reloads_total and the status page.
  void RecordReload(bool success, std::string_view error = {});
  // Graceful: stop accepting, let in-flight exchanges finish, close idle
  // connections. Wait() returns once every connection is gone.
  void Drain();
  // Immediate: abandons whatever is in flight.
  void Stop();
  void Wait();
  // Runs every worker's idle sweep now (Worker::SweepIdle) and returns,
  // once all have, how many connections it asked to park. From the first
  // call on, the workers' own sweeps (every second) stop: the caller
  // sweeps (tests). Not from a worker thread, nor after Stop() or a
  // finished drain (a stopped worker is skipped).
  std::size_t SweepIdle();

  // The bound ports (useful with port 0), in [[listeners]] order.
  std::vector<std::uint16_t> listener_ports() const;
  std::uint16_t admin_port() const;
  // [decision]'s bound port; 0 without [decision].
  std::uint16_t decision_port() const;
  std::size_t thread_count() const;

 private:
  bool ReloadConfig(std::shared_ptr<const rules::Config> config, std::string& error);
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tollgate::gateway
