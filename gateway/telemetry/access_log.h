// One line per request, in nginx's "combined" format (plus tollgate's fields)
// or as one JSON object per line, through spdlog's asynchronous logger to
// stdout or a file. Thread-safe; Write() does not wait for the disk. Lines
// reach the destination within a second (a flush every second) and at
// Flush().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "rules/config.h"

namespace spdlog {
class logger;
namespace details {
class thread_pool;
class periodic_worker;
}
}  // namespace spdlog

namespace tollgate::gateway {

struct AccessRecord {
  std::string_view client;  // address of the client (socket peer)
  std::string_view method;
  std::string_view target;
  unsigned version = 11;
  unsigned status = 0;
  std::uint64_t bytes_in = 0;   // request body bytes received
  std::uint64_t bytes_out = 0;  // response body bytes sent
  double duration_s = 0;
  double upstream_s = -1;  // < 0: no upstream was involved
  std::string_view route;
  std::string_view upstream;  // "host:port" of the server used
  std::string_view user_agent;
  std::string_view referer;
  std::string_view error;      // tollgate's error code when it answered itself
  std::string_view ratelimit;  // "rule:decision[,rule:decision...]"
  // The rule shown to the client (the limiting one, or the closest to its
  // limit): its key's kind ("ip", "user", "header:X-Api-Key", "ip+route"),
  // never the key's value; and the wait it announced when it limited.
  std::string_view limit_key;
  std::int64_t retry_after_ms = -1;  // < 0: not limited
  // A settling rule's units (token budgets): reserved at admission (< 0:
  // none), and settled from the response (< 0: the response did not say).
  std::int64_t cost_reserved = -1;
  std::int64_t cost_settled = -1;
  // X-Request-Id: visible ASCII only (gateway/core/request_id.h), written
  // as it is.
  std::string_view request_id;
};

class AccessLog {
 public:
  // nullptr with `error` set when the destination cannot be opened; a log
  // that writes nothing when config.access is "off".
  static std::unique_ptr<AccessLog> Create(const rules::LogConfig& config, std::string& error);
  ~AccessLog();

  bool enabled() const { return logger_ != nullptr; }
  void Write(const AccessRecord& record);
  // Hands the lines written so far to the destination without waiting for
  // the next periodic flush (e.g. when a drain begins).
  void Flush();

 private:
  AccessLog() = default;
  // Its own writer thread: destroying the log drains it (every line written,
  // the thread joined) before the sink goes away.
  std::shared_ptr<spdlog::details::thread_pool> pool_;
  std::shared_ptr<spdlog::logger> logger_;
  // Flushes logger_ every second: lines of a quiet gateway are not held in
  // the sink's buffer for minutes. Stopped before logger_ goes.
  std::unique_ptr<spdlog::details::periodic_worker> flusher_;
  rules::LogFormat format_ = rules::LogFormat::kCombined;
};

}  // namespace tollgate::gateway
