#include "gateway/tools/trace_line.h"

#include <fmt/format.h>

#include <charconv>

#include "algorithms/validate.h"
#include "store/store.h"

namespace tollgate::gateway {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

bool ParseInt(std::string_view text, std::int64_t& out) {
  text = Trim(text);
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size() && !text.empty();
}

TraceLine Error(std::string message) {
  TraceLine r;
  r.kind = TraceLine::Kind::kError;
  r.error = std::move(message);
  return r;
}

}  // namespace

FourthColumn FourthColumnOf(std::string_view header) {
  std::string_view rest = Trim(header);
  if (rest.rfind("t_ms", 0) != 0) return FourthColumn::kGateway;
  for (int i = 0; i < 3; ++i) {
    const std::size_t comma = rest.find(',');
    if (comma == std::string_view::npos) return FourthColumn::kGateway;
    rest.remove_prefix(comma + 1);
  }
  return Trim(rest.substr(0, rest.find(','))) == "settled" ? FourthColumn::kSettled
                                                           : FourthColumn::kGateway;
}

TraceLine ParseTraceLine(std::string_view text, bool seen_data, std::int64_t default_cost,
                         FourthColumn fourth) {
  const std::string_view line = Trim(text);
  if (line.empty() || line.front() == '#') return {};
  if (!seen_data && line.rfind("t_ms", 0) == 0) return {};  // header
  const std::size_t first = line.find(',');
  if (first == std::string_view::npos) return Error("expected \"t_ms,key[,cost[,gateway]]\"");
  std::string_view rest = line.substr(first + 1);
  std::string_view key = rest;
  std::int64_t cost = default_cost;
  std::int64_t gateway = -1;
  std::int64_t settled = -1;
  if (const std::size_t second = rest.find(','); second != std::string_view::npos) {
    key = rest.substr(0, second);
    std::string_view cost_text = rest.substr(second + 1);
    if (const std::size_t third = cost_text.find(','); third != std::string_view::npos) {
      const std::string_view fourth_text = cost_text.substr(third + 1);
      const bool settles = fourth == FourthColumn::kSettled;
      std::int64_t& value = settles ? settled : gateway;
      // An empty column (as CSV exporters write them) is none.
      if (!Trim(fourth_text).empty() && (!ParseInt(fourth_text, value) || value < 0)) {
        return Error(fmt::format("{} \"{}\" is not a non-negative integer",
                                 settles ? "settled" : "gateway", Trim(fourth_text)));
      }
      cost_text = cost_text.substr(0, third);
    }
    if (!((gateway >= 0 || settled >= 0) && Trim(cost_text).empty()) &&
        !ParseInt(cost_text, cost)) {
      return Error(fmt::format("cost \"{}\" is not an integer", Trim(cost_text)));
    }
  }
  key = Trim(key);
  std::int64_t t = 0;
  if (!ParseInt(line.substr(0, first), t) || t < 0) {
    return Error(fmt::format("time \"{}\" is not a non-negative integer of milliseconds",
                             Trim(line.substr(0, first))));
  }
  if (t > algorithms::kMaxTimeMs) {
    return Error(fmt::format("time {} is too large: at most {} milliseconds (2^50)", t,
                             algorithms::kMaxTimeMs));
  }
  if (key.empty()) return Error("the key is empty");
  if (key.size() > store::kMaxKeyBytes) {
    return Error(fmt::format("the key is longer than {} bytes", store::kMaxKeyBytes));
  }
  TraceLine r;
  r.kind = TraceLine::Kind::kRow;
  r.t_ms = t;
  r.key = key;
  r.cost = cost;
  r.gateway = gateway;
  r.settled = settled;
  return r;
}

}  // namespace tollgate::gateway
