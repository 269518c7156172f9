#include "gateway/tools/help.h"

#include <fmt/format.h>

#include <array>

#include "gateway/tools/ctl.h"

namespace tollgate::gateway {
namespace {

struct Subcommand {
  std::string_view name;
  std::string_view synopsis;  // the overview's lines
  std::string_view details;   // what its own help adds
};

constexpr std::array kSubcommands = {
    Subcommand{"replay",
               R"(  tollgate replay --algorithm NAME --limit L --window DURATION
                  [--burst B] [--sub-windows N] [--nodelay]
                  [--store local|redis] [--redis URL] < trace.csv
  tollgate replay --config FILE --rule NAME [--store local|redis] [--redis URL] < trace.csv
                                    decide a trace (t_ms,key[,cost]) with a virtual clock;
                                    header t_ms,key,cost,settled: settle each allowed
                                    reservation to the settled cost
  tollgate replay ... --sync lease [--gateways N] [--lease-ttl DURATION] [--lease-max N]
                                    a fleet of N gateways deciding from leases, next to
                                    one exact store (t_ms,key[,cost[,gateway]])
  tollgate replay --upstream-model [--capacity N] [--service-time DURATION]
                  [--concurrency N] [--max-delay DURATION] [--max-waiting N]
                  [--timeout DURATION] | [--config FILE --upstream NAME] < trace.csv
                                    arrivals (t_ms,key: key is the flow) against a model
                                    upstream: no limit, fixed, adaptive; first come or fair
)",
               R"(--burst: token_bucket and leaky_bucket only; --nodelay: leaky_bucket only.
--config/--rule: the rule's windows and cost from the file (no --algorithm, --limit, ...).
--redis (with --store redis): default redis://127.0.0.1:6379/0.
--sync lease: --gateways (default 1), --lease-ttl and --lease-max default to the
rule's sync = "lease" keys, else to the built-in defaults.
--upstream-model: --capacity (default 8) requests served at once in --service-time
(default 50ms), slower in proportion beyond; --max-delay (default 5s) a request waits
for a place; --config/--upstream take the limit and the wait from an [[upstreams]].
)"},
    Subcommand{"import",
               R"(  tollgate import envoy-ratelimit FILE
                                    print the [[rules]] for an envoyproxy/ratelimit
                                    configuration (YAML)
)",
               R"(What cannot be translated: FILE:LINE:COLUMN on stderr and exit 1; what is
left out: FILE:LINE:COLUMN: warning: on stderr.
)"},
    Subcommand{"echo-upstream",
               R"(  tollgate echo-upstream [--listen HOST:PORT] [--threads N]
                                    run the bundled demo/benchmark upstream
)",
               R"(--listen: default 127.0.0.1:9000 (port 0: any free port); --threads: 1 to 256.
)"},
    Subcommand{"schema",
               R"(  tollgate schema                   print the configuration's JSON Schema
)",
               R"(The schema (JSON Schema draft-07) of the configuration file, made from the
table of keys the reader checks: tollgate.schema.json holds it. Editors that
check TOML with a JSON Schema (Taplo, VS Code's Even Better TOML) use it; see
docs/configuration.md. It checks names, types, ranges and choices; what
depends on several keys only tollgate --check-config checks.
)"},
    Subcommand{"ctl",
               R"(  tollgate ctl [--admin URL] [--token-env NAME] [--json] COMMAND ...
                                    the admin API's client (tollgate ctl --help)
)",
               ""},
};

}  // namespace

std::string OverviewHelp() {
  std::string text = R"(usage:
  tollgate --config FILE            run the gateway
  tollgate --check-config FILE      validate FILE; print every error as file:line:col
)";
  for (const Subcommand& s : kSubcommands) text += s.synopsis;
  text += R"(  tollgate help SUBCOMMAND, tollgate SUBCOMMAND --help
                                    that subcommand's help
  tollgate --version
  tollgate --help

signals: SIGTERM/SIGINT drain gracefully (a second one stops at once);
         SIGHUP reloads the configuration file (on error the old one stays).
)";
  return text;
}

std::optional<std::string> SubcommandHelp(std::string_view subcommand) {
  if (subcommand == "ctl") return std::string(kCtlUsage);
  for (const Subcommand& s : kSubcommands) {
    if (s.name == subcommand) return fmt::format("usage:\n{}\n{}", s.synopsis, s.details);
  }
  return std::nullopt;
}

std::string UsageLine(std::string_view subcommand, std::string_view problem) {
  const std::string program =
      subcommand.empty() ? std::string("tollgate") : fmt::format("tollgate {}", subcommand);
  return fmt::format("{}: {}; see '{} --help'\n", program, problem, program);
}

}  // namespace tollgate::gateway
