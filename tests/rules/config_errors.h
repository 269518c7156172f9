// What loading a configuration text reports, for the rules tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rules/config.h"

namespace tollgate::rules {

// Every error of `text` (as "t.toml"), "file:line:col: message" each; the
// configuration loads exactly when there is none.
inline std::vector<std::string> Errors(const std::string& text) {
  LoadResult r = LoadConfigText(text, "t.toml");
  std::vector<std::string> out;
  for (const ConfigError& e : r.errors) out.push_back(e.ToString());
  EXPECT_EQ(r.config.has_value(), out.empty());
  return out;
}

}  // namespace tollgate::rules
