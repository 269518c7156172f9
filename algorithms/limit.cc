#include "algorithms/limit.h"

#include <array>

namespace tollgate::algorithms {
namespace {

constexpr std::array<std::string_view, kAlgorithmCount> kNames = {
    "token_bucket", "leaky_bucket", "fixed_window", "sliding_log", "sub_window", "two_bucket",
};

}  // namespace

std::string_view AlgorithmName(Algorithm algorithm) {
  return kNames[static_cast<std::size_t>(algorithm)];
}

std::optional<Algorithm> ParseAlgorithm(std::string_view name) {
  for (std::size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return static_cast<Algorithm>(i);
  }
  return std::nullopt;
}

std::string_view AlgorithmNames() {
  return "token_bucket, leaky_bucket, fixed_window, sliding_log, sub_window, two_bucket";
}

}  // namespace tollgate::algorithms
