// What the configuration tests share: a file's errors as the loader
// reports them, and the smallest file that loads.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rules/config.h"

namespace tollgate::rules {

inline std::vector<std::string> Errors(const std::string& text) {
  LoadResult r = LoadConfigText(text, "t.toml");
  std::vector<std::string> out;
  for (const ConfigError& e : r.errors) out.push_back(e.ToString());
  EXPECT_EQ(r.config.has_value(), out.empty());
  return out;
}

inline constexpr const char* kMinimal = R"([[listeners]]
address = "127.0.0.1:8080"
[[upstreams]]
name = "api"
servers = ["127.0.0.1:9000"]
[[routes]]
upstream = "api"
)";

}  // namespace tollgate::rules
