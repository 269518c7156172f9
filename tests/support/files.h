// Reading files in tests.
#pragma once

#include <string>

namespace tollgate::testing {

// The whole content of the file at `path` (bytes as they are); "" when it
// cannot be read.
std::string ReadFile(const std::string& path);

}  // namespace tollgate::testing
