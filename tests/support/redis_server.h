// A throwaway redis-server for tests: started on a free loopback port with
// no persistence, killed at destruction. Commands go through a synchronous
// hiredis connection. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tollgate::testing {

enum class RedisMode { kStandalone, kCluster };

class RedisServer {
 public:
  explicit RedisServer(std::string password = "", RedisMode mode = RedisMode::kStandalone);
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
  // SIGSTOP: a stalled server. Its connections stay open and take what is
  // written to them, but nothing is answered (nor accepted) until
  // Resume(), however long that takes: unlike CLIENT PAUSE, no duration to
  // outlast. Command() would block meanwhile: do not call it.
  void Pause();
  // SIGCONT: the server answers what was sent while it was paused.
  void Resume();
  // One command; the reply as text ("OK", "1", an error's message, array
  // elements joined by '\n'). Throws std::runtime_error when unreachable.
  std::string Command(const std::vector<std::string>& args);

 private:
  std::string ClusterConfigFile() const;  // RedisMode::kCluster: the node's own state
  std::string password_;
  RedisMode mode_;
  std::uint16_t port_ = 0;
  std::uint16_t cluster_port_ = 0;  // the cluster bus (RedisMode::kCluster)
  pid_t pid_ = -1;
};

// Three masters in one Redis Cluster on loopback (redis-cli --cluster
// create, no replicas), each owning a third of the slots.
class RedisCluster {
 public:
  RedisCluster();
  RedisServer& node(std::size_t i) { return *nodes_[i]; }
  // "127.0.0.1:port" of node 0, a seed.
  std::string seed() const;
  // The node that owns `key`'s slot now.
  std::size_t OwnerOf(const std::string& key);
  // Moves `slot` from node `from` to node `to` as redis-cli --cluster
  // reshard does (IMPORTING/MIGRATING, MIGRATE key by key, SETSLOT NODE),
  // pausing `pause_ms` between keys so that traffic meets the migration.
  // The end: SETSLOT NODE on `from` first and on `to` `pause_ms` later, so
  // that for that time each of the two sends the slot's commands to the
  // other (MOVED back and forth), as when gossip or a tool orders it so.
  void MoveSlot(int slot, std::size_t from, std::size_t to, int pause_ms);

 private:
  std::vector<std::unique_ptr<RedisServer>> nodes_;
};

}  // namespace tollgate::testing
