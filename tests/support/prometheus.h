// Reading samples out of a Prometheus text exposition (the admin API's
// /metrics) in tests.
#pragma once

#include <cstdint>
#include <string>

namespace tollgate::testing {

// The value, as written, of `series` (a metric's name with its labels as
// the exposition writes them, e.g. `tollgate_requests_total{route="/",code="200"}`):
// the rest of the first line that is `series` and a space; "" when no line
// is.
std::string SampleText(const std::string& metrics, const std::string& series);

// SampleText as a number; -1 when there is no such line.
double Sample(const std::string& metrics, const std::string& series);
std::int64_t IntSample(const std::string& metrics, const std::string& series);

}  // namespace tollgate::testing
