// tollgate: a rate-limiting HTTP reverse proxy. Command-line entry point.
#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <charconv>
#include <csignal>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "algorithms/lease.h"
#include "algorithms/limit.h"
#include "algorithms/validate.h"
#include "base/clock.h"
#include "gateway/admin/service_notify.h"
#include "gateway/server.h"
#include "gateway/tools/ctl.h"
#include "gateway/tools/echo_upstream.h"
#include "gateway/tools/help.h"
#include "gateway/tools/import_envoy.h"
#include "gateway/tools/replay.h"
#include "gateway/tools/replay_upstream.h"
#include "rules/config.h"
#include "rules/config_schema.h"
#include "rules/duration.h"

namespace tollgate::gateway {
namespace {

// A usage error: one line saying what is wrong and where the help is.
int Usage(std::string_view problem, std::string_view subcommand = "") {
  std::cerr << UsageLine(subcommand, problem);
  return 2;
}

// A file-level error (the file cannot be read) has no position: it reads
// "tollgate: cannot read FILE: REASON".
void PrintErrors(const std::vector<rules::ConfigError>& errors) {
  for (const rules::ConfigError& e : errors) {
    std::cerr << (e.line == 0 ? "tollgate: " : "") << e.ToString() << "\n";
  }
}

int CheckConfig(const std::string& path) {
  rules::LoadResult loaded = rules::LoadConfigFile(path);
  if (!loaded.config) {
    PrintErrors(loaded.errors);
    return 1;
  }
  std::cout << path << ": ok\n";
  return 0;
}

// SIGHUP: the file is read again; on any error the running configuration
// stays in force and every problem is logged with its position.
void ReloadFile(const std::string& path, Server& server) {
  rules::LoadResult loaded = rules::LoadConfigFile(path);
  if (!loaded.config) {
    for (const rules::ConfigError& e : loaded.errors) {
      spdlog::error("reload: {}", e.ToString());
    }
    spdlog::error("reload failed: the running configuration stays in force");
    server.RecordReload(false, loaded.errors.empty() ? "" : loaded.errors.front().ToString());
    return;
  }
  std::string error;
  if (!server.Reload(std::make_shared<const rules::Config>(std::move(*loaded.config)), error)) {
    spdlog::error("reload failed: {}; the running configuration stays in force", error);
    return;
  }
  spdlog::info("reload: {} is in force", path);
}

// A reload as the service manager sees it: RELOADING=1, then READY=1 once
// the new configuration is in force or the old one stays.
void Reload(const std::string& path, Server& server) {
  NotifyServiceManager(ServiceState::kReloading);
  ReloadFile(path, server);
  NotifyServiceManager(ServiceState::kReady);
}

// [server] watch_config: the file's size and modification time, looked at
// every second; a change is reloaded once it has held for one look (an
// editor may write in several steps), as SIGHUP would.
class ConfigWatcher {
 public:
  ConfigWatcher(boost::asio::io_context& io, std::string path, Server& server)
      : timer_(io), path_(std::move(path)), server_(server), applied_(Look()), seen_(applied_) {}
  void Start() {
    timer_.expires_after(std::chrono::seconds(1));
    timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      const Signature now = Look();
      if (now != applied_) {
        if (now == seen_) {
          applied_ = now;
          Reload(path_, server_);
        }
        seen_ = now;
      }
      Start();
    });
  }
  void Stop() { timer_.cancel(); }

 private:
  using Signature = std::pair<std::int64_t, std::int64_t>;  // mtime ns, size; -1: unreadable
  Signature Look() const {
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0) return {-1, -1};
    return {static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
            static_cast<std::int64_t>(st.st_size)};
  }
  boost::asio::steady_timer timer_;
  std::string path_;
  Server& server_;
  Signature applied_;
  Signature seen_;
};

// The startup log's second line: every bound address, with or without TLS.
std::string Addresses(const rules::Config& config, const Server& server) {
  auto bound = [](const rules::ListenerConfig& l, std::uint16_t port) {
    return fmt::format("{} ({})", rules::HostPort{l.address.host, port}.ToString(),
                       l.tls() ? "tls" : "plain");
  };
  std::string text = "listening on";
  const std::vector<std::uint16_t> ports = server.listener_ports();
  for (std::size_t i = 0; i < ports.size() && i < config.listeners.size(); ++i) {
    text += (i == 0 ? " " : ", ") + bound(config.listeners[i], ports[i]);
  }
  text +=
      "; admin on " + rules::HostPort{config.admin.address.host, server.admin_port()}.ToString();
  if (config.decision) {
    text += "; decision on " + bound(config.decision->listener, server.decision_port());
  }
  return text;
}

int Run(const std::string& path) {
  rules::LoadResult loaded = rules::LoadConfigFile(path);
  if (!loaded.config) {
    PrintErrors(loaded.errors);
    return 1;
  }
  auto config = std::make_shared<const rules::Config>(std::move(*loaded.config));
  spdlog::set_level(spdlog::level::from_str(config->log.level));
  store::SteadyClock clock;
  std::string error;
  std::unique_ptr<Server> server = Server::Create(config, clock, error);
  if (!server) {
    std::cerr << "tollgate: " << error << "\n";
    return 1;
  }
  boost::asio::io_context signals_io;
  boost::asio::signal_set signals(signals_io, SIGINT, SIGTERM, SIGHUP);
  boost::asio::steady_timer drain_deadline(signals_io);
  bool draining = false;
  std::function<void(const boost::system::error_code&, int)> on_signal =
      [&](const boost::system::error_code& ec, int signal) {
        if (ec) return;
        if (signal == SIGHUP) {
          Reload(path, *server);
        } else if (!draining) {
          draining = true;
          NotifyServiceManager(ServiceState::kStopping);
          spdlog::info("signal {}: draining (at most {} ms)", signal,
                       config->server.drain_timeout_ms);
          server->Drain();
          drain_deadline.expires_after(std::chrono::milliseconds(config->server.drain_timeout_ms));
          drain_deadline.async_wait([&](const boost::system::error_code& timer_ec) {
            if (timer_ec) return;
            spdlog::warn("drain timeout: closing the remaining connections");
            server->Stop();
          });
        } else {
          spdlog::warn("signal {} again: stopping now", signal);
          server->Stop();
        }
        signals.async_wait(on_signal);
      };
  signals.async_wait(on_signal);
  std::optional<ConfigWatcher> watcher;
  if (config->server.watch_config) {
    watcher.emplace(signals_io, path, *server);
    watcher->Start();
  }

  server->Start();
  std::string ports;
  for (std::uint16_t p : server->listener_ports()) ports += " " + std::to_string(p);
  spdlog::info("tollgate {} serving on port(s){} with {} thread(s); admin on port {}", kVersion,
               ports, server->thread_count(), server->admin_port());
  spdlog::info("{}", Addresses(*config, *server));
  NotifyServiceManager(ServiceState::kReady);
  std::thread waiter([&] {
    server->Wait();
    signals_io.stop();
  });
  signals_io.run();
  waiter.join();
  spdlog::info("tollgate stopped");
  server.reset();
  spdlog::shutdown();
  return 0;
}

std::optional<std::int64_t> ParseCount(std::string_view text) {
  std::int64_t n = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return n;
}

// The lease fleet of --sync lease: `flags` (--gateways, --lease-ttl,
// --lease-max as given), else the rule's sync = "lease" keys (`configured`),
// else the defaults (lease_max: a tenth of the smallest limit).
struct LeaseFlags {
  bool lease = false;  // --sync lease
  std::optional<std::int64_t> gateways, ttl_ms, max_units;
};
std::optional<LeaseReplay> FleetOf(const LeaseFlags& flags,
                                   const std::vector<algorithms::LimitParams>& windows,
                                   const std::optional<store::LimitSpec::Lease>& configured) {
  if (!flags.lease) return std::nullopt;
  LeaseReplay fleet;
  fleet.gateways = flags.gateways.value_or(fleet.gateways);
  fleet.ttl_ms =
      flags.ttl_ms.value_or(configured ? configured->ttl_ms : algorithms::kDefaultLeaseTtlMs);
  fleet.max_units = flags.max_units.value_or(configured ? configured->max_units
                                                        : algorithms::DefaultLeaseMax(windows));
  return fleet;
}

// --config FILE --rule NAME: the rule's windows (all of them) and cost.
int ReplayConfiguredRule(const std::string& file, const std::string& rule_name,
                         const std::optional<store::RedisAddress>& redis, const LeaseFlags& lease) {
  rules::LoadResult loaded = rules::LoadConfigFile(file);
  if (!loaded.config) {
    PrintErrors(loaded.errors);
    return 1;
  }
  for (const rules::RuleConfig& rule : loaded.config->rules) {
    if (rule.name != rule_name) continue;
    if (rule.exempt) {
      std::cerr << "tollgate: rule \"" << rule_name << "\" is exempt: it limits nothing\n";
      return 1;
    }
    if (rule.max_inflight > 0) {
      std::cerr << "tollgate: rule \"" << rule_name
                << "\" limits requests in flight, which a trace of arrivals cannot replay\n";
      return 1;
    }
    ReplayOptions options;
    options.windows = rule.limit->windows;
    options.default_cost = rule.cost;
    options.redis = redis;
    options.lease = FleetOf(lease, options.windows, rule.limit->lease);
    std::ios::sync_with_stdio(false);
    return RunReplay(options, std::cin, std::cout, std::cerr);
  }
  std::cerr << "tollgate: " << file << " has no rule named \"" << rule_name << "\"\n";
  return 1;
}

// `tollgate import envoy-ratelimit FILE`: the TOML on stdout, or every
// thing it cannot translate as FILE:LINE:COLUMN on stderr and exit 1; what
// it leaves out as FILE:LINE:COLUMN: warning: on stderr either way.
int Import(const std::vector<std::string>& args) {
  auto usage = [](std::string_view problem) { return Usage(problem, "import"); };
  if (args.size() != 2 || args[0] != "envoy-ratelimit") {
    return usage("import takes envoy-ratelimit FILE");
  }
  const std::string& file = args[1];
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) {
    std::cerr << "tollgate: cannot read " << file << "\n";
    return 1;
  }
  ImportResult result = ImportEnvoyRatelimit(text.str(), file);
  for (const auto& [list, kind] :
       {std::pair{&result.warnings, "warning: "}, std::pair{&result.errors, ""}}) {
    for (const ImportMessage& m : *list) {
      std::cerr << file << ":" << m.line << ":" << m.column << ": " << kind << m.message << "\n";
    }
  }
  if (!result.errors.empty()) return 1;
  std::cout << result.toml;
  return 0;
}

int Replay(const std::vector<std::string>& args) {
  auto usage = [](std::string_view problem) { return Usage(problem, "replay"); };
  if (std::find(args.begin(), args.end(), "--upstream-model") != args.end()) {
    std::string problem;
    const auto options = ParseUpstreamReplayFlags(args, problem);
    if (!options) return usage(problem);
    std::ios::sync_with_stdio(false);
    return RunUpstreamReplay(*options, std::cin, std::cout, std::cerr);
  }
  std::optional<algorithms::Algorithm> algorithm;
  std::optional<std::string> config_file;
  std::optional<std::string> rule_name;
  std::optional<std::int64_t> limit;
  std::optional<std::int64_t> window_ms;
  std::optional<std::int64_t> burst;
  std::int64_t sub_windows = 10;
  bool nodelay = false;
  std::string store_kind = "local";
  std::optional<std::string> redis_url;
  LeaseFlags lease;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= args.size()) return std::nullopt;
      return args[++i];
    };
    if (a == "--nodelay") {
      nodelay = true;
      continue;
    }
    const std::optional<std::string> v = value();
    if (!v) return usage(fmt::format("{} needs a value", a));
    if (a == "--algorithm") {
      algorithm = algorithms::ParseAlgorithm(*v);
      if (!algorithm) {
        return usage(fmt::format("--algorithm must be one of {}; got \"{}\"",
                                 algorithms::AlgorithmNames(), *v));
      }
    } else if (a == "--limit") {
      limit = ParseCount(*v);
      if (!limit) return usage(fmt::format("--limit must be an integer; got \"{}\"", *v));
    } else if (a == "--window") {
      std::string problem;
      window_ms = rules::ReadPositiveDurationMs(*v, problem);
      if (!window_ms) return usage(fmt::format("--window {}; got \"{}\"", problem, *v));
    } else if (a == "--burst") {
      burst = ParseCount(*v);
      if (!burst) return usage(fmt::format("--burst must be an integer; got \"{}\"", *v));
    } else if (a == "--sub-windows") {
      auto n = ParseCount(*v);
      if (!n) return usage(fmt::format("--sub-windows must be an integer; got \"{}\"", *v));
      sub_windows = *n;
    } else if (a == "--config") {
      config_file = *v;
    } else if (a == "--rule") {
      rule_name = *v;
    } else if (a == "--store") {
      if (*v != "local" && *v != "redis") {
        return usage(fmt::format("--store must be \"local\" or \"redis\"; got \"{}\"", *v));
      }
      store_kind = *v;
    } else if (a == "--redis") {
      redis_url = *v;
    } else if (a == "--sync") {
      if (*v != "exact" && *v != "lease") {
        return usage(fmt::format("--sync must be \"exact\" or \"lease\"; got \"{}\"", *v));
      }
      lease.lease = *v == "lease";
    } else if (a == "--gateways") {
      lease.gateways = ParseCount(*v);
      if (!lease.gateways || *lease.gateways < 1 || *lease.gateways > LeaseReplay::kMaxGateways) {
        return usage(fmt::format("--gateways must be an integer from 1 to {}; got \"{}\"",
                                 LeaseReplay::kMaxGateways, *v));
      }
    } else if (a == "--lease-ttl") {
      std::string problem;
      lease.ttl_ms = rules::ReadPositiveDurationMs(*v, problem);
      if (!lease.ttl_ms) return usage(fmt::format("--lease-ttl {}; got \"{}\"", problem, *v));
    } else if (a == "--lease-max") {
      lease.max_units = ParseCount(*v);
      if (!lease.max_units || *lease.max_units < 1) {
        return usage(fmt::format("--lease-max must be a positive integer; got \"{}\"", *v));
      }
    } else {
      return usage(fmt::format("unknown option {}", a));
    }
  }
  if (redis_url && store_kind != "redis") return usage("--redis goes with --store redis");
  if (!lease.lease && (lease.gateways || lease.ttl_ms || lease.max_units)) {
    return usage("--gateways, --lease-ttl and --lease-max go with --sync lease");
  }
  if (lease.lease && store_kind == "redis") {
    return usage("--sync lease simulates the fleet and its Redis in the process: no --store redis");
  }
  std::optional<store::RedisAddress> redis;
  if (store_kind == "redis") {
    std::string error;
    redis = store::ParseRedisUrl(redis_url.value_or("redis://127.0.0.1:6379/0"), error);
    if (!redis) return usage("--redis: " + error);
  }
  if (config_file || rule_name) {
    if (!config_file || !rule_name) return usage("--config and --rule go together");
    if (algorithm || limit || window_ms || burst || nodelay) {
      return usage("--config/--rule take the limit from the file: no --algorithm, --limit, ...");
    }
    return ReplayConfiguredRule(*config_file, *rule_name, redis, lease);
  }
  if (!algorithm || !limit || !window_ms) {
    return usage("replay needs --algorithm, --limit and --window (or --config and --rule)");
  }
  algorithms::LimitParams p;
  p.algorithm = *algorithm;
  p.limit = *limit;
  p.window_ms = *window_ms;
  p.sub_windows = sub_windows;
  p.shaping = nodelay ? algorithms::Shaping::kNoDelay : algorithms::Shaping::kDelay;
  const bool bucket = p.algorithm == algorithms::Algorithm::kTokenBucket ||
                      p.algorithm == algorithms::Algorithm::kLeakyBucket;
  if (burst && !bucket) return usage("--burst applies to token_bucket and leaky_bucket only");
  if (nodelay && p.algorithm != algorithms::Algorithm::kLeakyBucket) {
    return usage("--nodelay applies to leaky_bucket only");
  }
  p.burst = burst.value_or(p.algorithm == algorithms::Algorithm::kTokenBucket ? p.limit : 0);
  ReplayOptions options;
  options.windows = {p};
  options.redis = redis;
  options.lease = FleetOf(lease, options.windows, std::nullopt);
  std::ios::sync_with_stdio(false);
  return RunReplay(options, std::cin, std::cout, std::cerr);
}

int EchoUpstreamMain(const std::vector<std::string>& args) {
  auto usage = [](std::string_view problem) { return Usage(problem, "echo-upstream"); };
  std::string listen = "127.0.0.1:9000";
  int threads = 1;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--listen" && i + 1 < args.size()) {
      listen = args[++i];
    } else if (args[i] == "--threads" && i + 1 < args.size()) {
      auto n = ParseCount(args[++i]);
      if (!n || *n < 1 || *n > 256) return usage("--threads must be between 1 and 256");
      threads = static_cast<int>(*n);
    } else {
      return usage(fmt::format("unknown option {}", args[i]));
    }
  }
  auto hp = rules::ParseHostPort(listen);
  if (!hp) return usage(fmt::format("--listen must be HOST:PORT; got \"{}\"", listen));
  std::string error;
  auto upstream = EchoUpstream::Create(hp->host, hp->port, threads, error);
  if (!upstream) {
    std::cerr << "tollgate: " << error << "\n";
    return 1;
  }
  boost::asio::io_context signals_io;
  boost::asio::signal_set signals(signals_io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code&, int) { upstream->Stop(); });
  upstream->Start();
  std::cerr << "echo upstream listening on " << hp->host << ":" << upstream->port() << "\n";
  std::thread waiter([&] {
    upstream->Wait();
    signals_io.stop();
  });
  signals_io.run();
  waiter.join();
  return 0;
}

int Main(int argc, char** argv) {
  // A write to a socket or pipe whose reader has gone (a Redis connection
  // closed under hiredis's write(), stdout piped to a dead logger) fails
  // with EPIPE instead of ending the process.
  std::signal(SIGPIPE, SIG_IGN);
  // Operational messages go to stderr; stdout is the access log's.
  spdlog::set_default_logger(spdlog::stderr_color_mt("tollgate"));
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return Usage("nothing to do");
  const std::string& command = args.front();
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (command == "--help" || command == "-h") {
    std::cout << OverviewHelp();
    return 0;
  }
  if (command == "--version") {
    std::cout << "tollgate " << kVersion << "\n";
    return 0;
  }
  if (command == "help") {
    if (rest.empty()) {
      std::cout << OverviewHelp();
      return 0;
    }
    const std::optional<std::string> help = SubcommandHelp(rest.front());
    if (!help || rest.size() > 1) return Usage(fmt::format("no help for \"{}\"", rest.back()));
    std::cout << *help;
    return 0;
  }
  // `tollgate SUBCOMMAND --help`, wherever --help stands.
  if (const std::optional<std::string> help = SubcommandHelp(command);
      help &&
      std::ranges::any_of(rest, [](const std::string& a) { return a == "--help" || a == "-h"; })) {
    std::cout << *help;
    return 0;
  }
  if (command == "replay") return Replay(rest);
  if (command == "import") return Import(rest);
  if (command == "echo-upstream") return EchoUpstreamMain(rest);
  if (command == "ctl") return RunCtl(rest, std::cout, std::cerr);
  if (command == "schema") {
    if (!rest.empty()) {
      return Usage(fmt::format("unexpected argument \"{}\"", rest.front()), "schema");
    }
    std::cout << rules::ConfigSchemaJson();
    return 0;
  }
  if (command == "--config" || command == "--check-config") {
    if (rest.size() != 1) return Usage(command + " takes one FILE");
    return command == "--config" ? Run(rest.front()) : CheckConfig(rest.front());
  }
  return Usage(command.starts_with("-") ? "unknown option " + command
                                        : "unknown command \"" + command + "\"");
}

}  // namespace
}  // namespace tollgate::gateway

int main(int argc, char** argv) { return tollgate::gateway::Main(argc, argv); }
