#include "gateway/telemetry/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <array>
#include <fstream>
#include <sstream>
#include <string_view>

#include "gateway/telemetry/metrics_writer.h"

namespace tollgate::gateway {
namespace {

struct ProcessFamily {
  std::string_view name, type, help;
  double ProcessStats::*value;
};

constexpr std::array kFamilies = {
    ProcessFamily{"process_cpu_seconds_total", "counter",
                  "Total user and system CPU time spent in seconds.", &ProcessStats::cpu_seconds},
    ProcessFamily{"process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
                  &ProcessStats::resident_bytes},
    ProcessFamily{"process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
                  &ProcessStats::virtual_bytes},
    ProcessFamily{"process_open_fds", "gauge", "Number of open file descriptors.",
                  &ProcessStats::open_fds},
    ProcessFamily{"process_max_fds", "gauge", "Maximum number of open file descriptors.",
                  &ProcessStats::max_fds},
    ProcessFamily{"process_start_time_seconds", "gauge",
                  "Start time of the process since unix epoch in seconds.",
                  &ProcessStats::start_time_seconds},
};

// /proc/stat's btime: the Unix time the system booted.
std::optional<double> BootTime() {
  std::ifstream in("/proc/stat");
  std::string key;
  double value = 0;
  while (in >> key) {
    if (key == "btime" && in >> value) return value;
    in.ignore(1 << 20, '\n');
  }
  return std::nullopt;
}

double OpenFds() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  double n = 0;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] != '.') ++n;
  }
  ::closedir(dir);
  return n;
}

}  // namespace

std::optional<ProcessStats> ReadProcessStats() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  // The command name (field 2) is in parentheses and may hold spaces and
  // parentheses: the fields that follow start after the last ')'.
  const std::size_t close = line.rfind(')');
  const std::optional<double> boot = BootTime();
  if (close == std::string::npos || !boot) return std::nullopt;
  std::istringstream fields(line.substr(close + 1));
  // Fields 3..24 of proc(5): state, then numbers.
  std::string state;
  std::array<double, 21> f{};  // f[i]: field i + 4
  fields >> state;
  for (double& v : f) fields >> v;
  if (!fields) return std::nullopt;
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  ProcessStats s;
  s.cpu_seconds = (f[14 - 4] + f[15 - 4]) / ticks;                              // utime, stime
  s.start_time_seconds = *boot + f[22 - 4] / ticks;                             // starttime
  s.virtual_bytes = f[23 - 4];                                                  // vsize
  s.resident_bytes = f[24 - 4] * static_cast<double>(::sysconf(_SC_PAGESIZE));  // rss
  s.open_fds = OpenFds();
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0) s.max_fds = static_cast<double>(limit.rlim_cur);
  return s;
}

void AppendProcessMetrics(const ProcessStats& stats, std::string& out) {
  MetricsWriter w(out, "");
  for (const ProcessFamily& family : kFamilies) {
    w.Family(family.name, family.type, family.help);
    w.Sample(family.name, "", stats.*family.value);
  }
}

}  // namespace tollgate::gateway
