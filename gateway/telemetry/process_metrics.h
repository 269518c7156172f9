// The process_* metrics as Prometheus client libraries export them: CPU
// time, memory, file descriptors and start time, read from /proc/self and
// getrlimit at scrape time. Linux only; thread-safe (no state).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tollgate::gateway {

struct ProcessStats {
  double cpu_seconds = 0;         // user + system
  double resident_bytes = 0;      // resident set size
  double virtual_bytes = 0;       // virtual memory size
  double open_fds = 0;            // entries of /proc/self/fd
  double max_fds = 0;             // RLIMIT_NOFILE's soft limit
  double start_time_seconds = 0;  // Unix time the process started
};

// The figures now; nullopt when /proc/self/stat or /proc/stat cannot be read.
std::optional<ProcessStats> ReadProcessStats();

// Appends the process_* families (text exposition format) for `stats`.
void AppendProcessMetrics(const ProcessStats& stats, std::string& out);

}  // namespace tollgate::gateway
