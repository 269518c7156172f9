// The TOML configuration loader (rules/config.h, LoadConfigText) on arbitrary
// text: errors are expected, crashes, hangs and sanitizer reports are not.
// When the text loads, its routes and rules are exercised too (RouteTable).
#include "rules/config.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "rules/route_table.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // The loader opens the files the text names (TLS certificates, JWT keys
  // and secrets): keep the fuzzer away from devices, pseudo-files and
  // sockets, where a read may never end (/dev/zero, /dev/stdin, a FIFO under
  // /run). Not a defect of the loader: the configuration's author chooses
  // the files. (The seeds name conf/secrets/, not conf/dev/, for this.)
  for (std::string_view special : {"dev/", "proc/", "sys/", "run/"}) {
    if (text.find(special) != std::string_view::npos) return -1;
  }
  const tollgate::rules::LoadResult result = tollgate::rules::LoadConfigText(text, "fuzz.toml");
  static const bool print = std::getenv("FUZZ_PRINT") != nullptr;  // triage: print the errors
  if (print) {
    for (const tollgate::rules::ConfigError& e : result.errors) {
      std::fprintf(stderr, "%s\n", e.ToString().c_str());
    }
  }
  if (result.config.has_value() != result.errors.empty()) abort();
  for (const tollgate::rules::ConfigError& e : result.errors) {
    if (e.message.empty()) abort();
    (void)e.ToString();
  }
  if (result.config) {
    const tollgate::rules::RouteTable routes(result.config->routes);
    (void)routes.Match("api.example.com", "/api/x?y");
    (void)routes.Match("", "/");
  }
  return 0;
}
