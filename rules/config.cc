#include "rules/config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <tuple>

#include "rules/budget_config.h"
#include "rules/identity_config.h"
#include "rules/listener_config.h"
#include "rules/rules_config.h"
#include "rules/store_config.h"
#include "rules/upstream_config.h"
#include "rules/wait_config.h"

namespace tollgate::rules {
namespace {

void ReadServer(TableReader r, ServerConfig& out) {
  if (auto v = r.Integer("threads")) out.threads = static_cast<int>(*v);
  if (auto v = r.DurationMs("drain_timeout")) out.drain_timeout_ms = *v;
  if (auto b = r.Bool("watch_config")) out.watch_config = *b;
  if (auto v = r.Bool("via")) out.via = *v;
  r.Finish();
}

void ReadAdmin(TableReader r, AdminConfig& out) {
  if (auto a = r.Address("address")) out.address = *a;
  if (auto m = r.Bool("metrics")) out.metrics = *m;
  if (auto token = ReadSecret(r, "token_env", "token_file")) {
    if (token->size() < kMinAdminTokenBytes) {
      r.errors().Add(*r.Find(r.Has("token_file") ? "token_file" : "token_env"),
                     fmt::format("the admin token must be at least {} bytes; got {}",
                                 kMinAdminTokenBytes, token->size()));
    } else {
      out.token = std::move(*token);
    }
  }
  r.Finish();
}

void ReadTimeouts(TableReader r, TimeoutsConfig& out) {
  if (auto v = r.DurationMs("client_header")) out.client_header_ms = *v;
  if (auto v = r.DurationMs("client_idle")) out.client_idle_ms = *v;
  if (auto v = r.DurationMs("client_body")) out.client_body_ms = *v;
  if (auto v = r.DurationMs("upstream_connect")) out.upstream_connect_ms = *v;
  if (auto v = r.DurationMs("upstream_response")) out.upstream_response_ms = *v;
  if (auto v = r.DurationMs("request")) out.request_ms = *v;
  if (auto v = r.DurationMs("websocket_idle")) out.websocket_idle_ms = *v;
  r.Finish();
}

void ReadLimits(TableReader r, LimitsConfig& out) {
  if (auto v = r.Integer("max_header_bytes")) out.max_header_bytes = *v;
  if (auto v = r.Integer("max_body_bytes")) out.max_body_bytes = *v;
  if (auto v = r.Integer("max_waiting")) out.max_waiting = *v;
  ReadWeights(r, out);
  if (auto v = r.Integer("max_connections")) out.max_connections = *v;
  if (auto v = r.Integer("max_concurrent_streams")) out.max_concurrent_streams = *v;
  if (auto v = r.Integer("max_websocket_message_bytes")) {
    out.max_websocket_message_bytes = *v;
  }
  r.Finish();
}

void ReadLog(TableReader r, LogConfig& out) {
  if (auto v = r.String("access")) out.access = *v;
  if (auto v = r.OneOf("format")) {
    out.format = *v == "json" ? LogFormat::kJson : LogFormat::kCombined;
  }
  if (auto v = r.OneOf("level")) {
    out.level = *v;
  }
  r.Finish();
}

// Calls `read` for each table of an array of tables (`[[name]]`).
template <typename Fn>
void ForEachTable(TableReader& root, std::string_view key, Fn read) {
  const toml::value* v = root.Find(key);
  if (v == nullptr) return;
  if (!v->is_array()) {
    root.errors().Add(*v, fmt::format("\"{}\" must be an array of tables ([[{}]]); got {}", key,
                                      key, DescribeType(*v)));
    return;
  }
  for (const toml::value& item : v->as_array()) {
    if (!item.is_table()) {
      root.errors().Add(
          item, fmt::format("each [[{}]] entry must be a table; got {}", key, DescribeType(item)));
      continue;
    }
    read(TableReader(item, root.TableOf(key), root.errors()));
  }
}

template <typename Fn>
void ForTable(TableReader& root, std::string_view key, Fn read) {
  const toml::value* v = root.Find(key);
  if (v == nullptr) return;
  if (!v->is_table()) {
    root.errors().Add(
        *v, fmt::format("\"{}\" must be a table ([{}]); got {}", key, key, DescribeType(*v)));
    return;
  }
  read(TableReader(*v, root.TableOf(key), root.errors()));
}

LoadResult Build(const toml::value& root_value, const std::string& name) {
  ErrorList errors;
  Config config;
  config.path = name;
  TableReader root(root_value, RootTable(), errors);
  ForTable(root, "server", [&](TableReader r) { ReadServer(std::move(r), config.server); });
  ForEachTable(root, "listeners",
               [&](TableReader r) { ReadListener(std::move(r), config.listeners); });
  ForTable(root, "admin", [&](TableReader r) { ReadAdmin(std::move(r), config.admin); });
  ForTable(root, "timeouts", [&](TableReader r) { ReadTimeouts(std::move(r), config.timeouts); });
  ForTable(root, "limits", [&](TableReader r) { ReadLimits(std::move(r), config.limits); });
  ForTable(root, "log", [&](TableReader r) { ReadLog(std::move(r), config.log); });
  ForEachTable(root, "upstreams",
               [&](TableReader r) { ReadUpstream(std::move(r), config.upstreams); });
  ForEachTable(root, "routes",
               [&](TableReader r) { ReadRoute(std::move(r), config.upstreams, config.routes); });
  ForTable(root, "identity", [&](TableReader r) { ReadIdentity(std::move(r), config.identity); });
  ForTable(root, "store", [&](TableReader r) { ReadStore(std::move(r), config.store); });
  ForTable(root, "decision", [&](TableReader r) { ReadDecision(std::move(r), config.decision); });
  ForEachTable(root, "prices", [&](TableReader r) { ReadPrice(std::move(r), config.prices); });
  ForEachTable(root, "rules", [&](TableReader r) {
    ReadRule(std::move(r), config.store, config.prices.size(), config.rules);
  });
  ShareStoreKeys(config.store, config.rules);
  root.Finish();
  CheckDistinctAddresses(root_value, errors);
  // A decision service alone (Envoy's rate-limit service, /check) needs no
  // listener of its own nor anywhere to forward to.
  if (config.listeners.empty() && !config.decision) {
    errors.Add(ConfigError{name, 1, 1,
                           "no [[listeners]] and no [decision]: tollgate needs at least one "
                           "address to serve"});
  }
  if (config.routes.empty() && !config.listeners.empty()) {
    errors.Add(ConfigError{name, 1, 1, "no [[routes]]: requests would have nowhere to go"});
  }
  LoadResult result;
  result.errors = errors.errors();
  std::stable_sort(result.errors.begin(), result.errors.end(),
                   [](const ConfigError& a, const ConfigError& b) {
                     return std::tie(a.line, a.column) < std::tie(b.line, b.column);
                   });
  if (result.errors.empty()) result.config = std::move(config);
  return result;
}

// toml11's own message is multi-line; the first line, without its "[error]"
// tag and parser function name, is what a user needs. Some errors leave that
// line empty ("toml::parse_boolean: ", found by fuzz/config.cc: the user saw
// "file:2:1: " and nothing else) and say what is wrong only under the caret
// ("^--- the next token is not a boolean"): then that is the message.
std::string FirstLine(const std::string& what) {
  std::string line = what.substr(0, what.find('\n'));
  for (std::string_view tag : {"[error] "}) {
    if (line.rfind(tag, 0) == 0) line.erase(0, tag.size());
  }
  const std::size_t colon = line.find(": ");
  if (line.rfind("toml::", 0) == 0 && colon != std::string::npos) line.erase(0, colon + 2);
  if (line.find_first_not_of(' ') == std::string::npos) {
    constexpr std::string_view kCaret = "^--- ";
    const std::size_t caret = what.find(kCaret);
    line = caret == std::string::npos
               ? std::string()
               : what.substr(caret + kCaret.size(), what.find('\n', caret) - caret - kCaret.size());
  }
  if (line.find_first_not_of(' ') == std::string::npos) line = "syntax error";
  return line;
}

// The first 12 hex digits of the text's SHA-256.
std::string Digest(std::string_view text) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  return fmt::format("{:02x}", fmt::join(digest, digest + 6, ""));
}

LoadResult Parse(std::istream& in, const std::string& name) {
  try {
    return Build(toml::parse(in, name), name);
  } catch (const toml::syntax_error& e) {
    const toml::source_location loc = e.location();
    return {std::nullopt, {{name, loc.line(), loc.column(), FirstLine(e.what())}}};
  } catch (const std::exception& e) {
    return {std::nullopt, {{name, 0, 0, e.what()}}};
  }
}

}  // namespace

LoadResult LoadConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return {std::nullopt,
            {{path, 0, 0, fmt::format("cannot read {}: {}", path, std::strerror(errno))}}};
  }
  std::ostringstream text;
  text << in.rdbuf();
  return LoadConfigText(text.str(), path);
}

LoadResult LoadConfigText(std::string_view text, const std::string& name) {
  std::istringstream in{std::string(text)};
  LoadResult result = Parse(in, name);
  if (result.config) result.config->digest = Digest(text);
  return result;
}

}  // namespace tollgate::rules
