#include "files.h"

#include <fstream>
#include <sstream>

namespace tollgate::testing {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace tollgate::testing
