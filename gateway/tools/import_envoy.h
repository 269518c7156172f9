// `tollgate import envoy-ratelimit`: translates an envoyproxy/ratelimit
// configuration (YAML) into the equivalent `[[rules]]` TOML for the decision
// service's Envoy RLS rules (match.domain / match.descriptor).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tollgate::gateway {

// What envoyproxy/ratelimit's configuration says that tollgate cannot say
// (or a malformed file), at a 1-based line of the YAML text.
struct ImportError {
  int line = 0;
  std::string message;
};

// Exactly one of `toml` (when `error` is empty) and `error` is meaningful.
struct ImportResult {
  std::string toml;
  std::optional<ImportError> error;
};

// Pure: `yaml` is the configuration's text, `file_name` only appears in the
// TOML's header comment. Each descriptor with a `rate_limit`, leaf or not,
// becomes one rule matching the entries of its whole path (as in
// envoyproxy/ratelimit, a request descriptor of exactly those entries): a
// fixed window (envoyproxy/ratelimit's only algorithm) of
// `requests_per_unit` per `unit`, `action = "dry_run"` under `shadow_mode`,
// an exempt rule when `unlimited`. Stops at the first error. Thread-safe.
ImportResult ImportEnvoyRatelimit(std::string_view yaml, std::string_view file_name);

}  // namespace tollgate::gateway
