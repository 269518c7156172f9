// `tollgate import envoy-ratelimit`: translates an envoyproxy/ratelimit
// configuration (YAML) into the equivalent `[[rules]]` TOML for the decision
// service's Envoy RLS rules (match.domain / match.descriptor).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tollgate::gateway {

// Something of envoyproxy/ratelimit's configuration at a 1-based line and
// column of the YAML text: what tollgate cannot say (or a malformed file),
// or, as a warning, what the translation leaves out.
struct ImportMessage {
  int line = 0;
  int column = 0;
  std::string message;
};

struct ImportResult {
  std::string toml;                     // meaningful when `errors` is empty
  std::vector<ImportMessage> errors;    // every one found, in file order
  std::vector<ImportMessage> warnings;  // in file order
};

// Pure: `yaml` is the configuration's text, `file_name` only appears in the
// TOML's header comment. Each descriptor with a `rate_limit`, leaf or not,
// becomes one rule matching the entries of its whole path (as in
// envoyproxy/ratelimit, a request descriptor of exactly those entries): a
// fixed window (envoyproxy/ratelimit's only algorithm) of
// `requests_per_unit` per `unit` (0: every request refused),
// `action = "dry_run"` under `shadow_mode` (each descriptor OK, as there),
// an exempt rule when `unlimited`. An entry without a value next to entries
// of the same key with values matches every value but theirs (`{ not = [...]
// }`): envoyproxy/ratelimit takes an entry with the request's value before
// the one without. `name`, `detailed_metric` and `value_to_metric` are
// left out with a warning. Thread-safe.
ImportResult ImportEnvoyRatelimit(std::string_view yaml, std::string_view file_name);

}  // namespace tollgate::gateway
