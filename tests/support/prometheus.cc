#include "prometheus.h"

#include <algorithm>

namespace tollgate::testing {

std::string SampleText(const std::string& metrics, const std::string& series) {
  const std::string start = series + " ";
  for (std::size_t line = 0; line < metrics.size();) {
    const std::size_t end = std::min(metrics.find('\n', line), metrics.size());
    if (metrics.compare(line, start.size(), start) == 0 && end - line >= start.size()) {
      return metrics.substr(line + start.size(), end - line - start.size());
    }
    line = end + 1;
  }
  return "";
}

double Sample(const std::string& metrics, const std::string& series) {
  const std::string text = SampleText(metrics, series);
  return text.empty() ? -1 : std::stod(text);
}

std::int64_t IntSample(const std::string& metrics, const std::string& series) {
  const std::string text = SampleText(metrics, series);
  return text.empty() ? -1 : std::stoll(text);
}

}  // namespace tollgate::testing
