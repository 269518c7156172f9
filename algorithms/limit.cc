#include "algorithms/limit.h"

namespace tollgate::algorithms {
namespace {

// ", token_bucket, leaky_bucket, ..."
#define TOLLGATE_ALGORITHM_NAME(enumerator, name) ", " #name
constexpr std::string_view kJoinedNames = TOLLGATE_ALGORITHMS(TOLLGATE_ALGORITHM_NAME);
#undef TOLLGATE_ALGORITHM_NAME

}  // namespace

std::string_view AlgorithmName(Algorithm algorithm) {
  return kAlgorithmNames[static_cast<std::size_t>(algorithm)];
}

std::optional<Algorithm> ParseAlgorithm(std::string_view name) {
  for (std::size_t i = 0; i < std::size(kAlgorithmNames); ++i) {
    if (kAlgorithmNames[i] == name) return static_cast<Algorithm>(i);
  }
  return std::nullopt;
}

std::string_view AlgorithmNames() { return kJoinedNames.substr(2); }

}  // namespace tollgate::algorithms
