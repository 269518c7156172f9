#include "gateway/replay.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <charconv>
#include <istream>
#include <map>
#include <ostream>
#include <string_view>

#include "algorithms/validate.h"
#include "store/local_store.h"

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

struct KeyTotals {
  std::uint64_t allowed = 0;
  std::uint64_t limited = 0;
};

}  // namespace

int RunReplay(const ReplayOptions& options, std::istream& in, std::ostream& out,
              std::ostream& err) {
  if (auto problem = algorithms::ValidateWindows(options.windows)) {
    fmt::print(err, "replay: {}\n", *problem);
    return 1;
  }
  const store::LimitSpec spec = store::LimitSpec::Make(options.windows);
  store::LocalStoreOptions store_options;
  store_options.max_keys = std::size_t{1} << 24;
  store::LocalStore store(store_options);
  std::map<std::string, KeyTotals, std::less<>> totals;

  auto fail = [&](std::size_t line, std::string_view message) {
    out.flush();
    fmt::print(err, "{}:{}: {}\n", options.input_name, line, message);
    return 1;
  };

  out << "t_ms,key,cost,decision,remaining,retry_after_ms,delay_ms\n";
  std::string text;
  std::size_t line_number = 0;
  bool seen_data = false;
  std::int64_t last_t = 0;
  while (std::getline(in, text)) {
    ++line_number;
    const std::string_view line = Trim(text);
    if (line.empty() || line.front() == '#') continue;
    if (!seen_data && line.rfind("t_ms", 0) == 0) continue;  // header
    const std::size_t first = line.find(',');
    if (first == std::string_view::npos) {
      return fail(line_number, "expected \"t_ms,key[,cost]\"");
    }
    std::string_view rest = line.substr(first + 1);
    std::string_view key = rest;
    std::int64_t cost = options.default_cost;
    if (const std::size_t second = rest.find(','); second != std::string_view::npos) {
      key = rest.substr(0, second);
      if (!ParseInt(rest.substr(second + 1), cost)) {
        return fail(line_number,
                    fmt::format("cost \"{}\" is not an integer", Trim(rest.substr(second + 1))));
      }
    }
    key = Trim(key);
    std::int64_t t = 0;
    if (!ParseInt(line.substr(0, first), t) || t < 0) {
      return fail(line_number, fmt::format("time \"{}\" is not a non-negative integer of "
                                           "milliseconds",
                                           Trim(line.substr(0, first))));
    }
    if (key.empty()) return fail(line_number, "the key is empty");
    if (key.size() > store::kMaxKeyBytes) {
      return fail(line_number, fmt::format("the key is longer than {} bytes", store::kMaxKeyBytes));
    }
    if (seen_data && t < last_t) {
      return fail(line_number, fmt::format("time goes backwards: {} after {}", t, last_t));
    }
    if (auto problem = algorithms::ValidateCost(options.windows, cost)) {
      return fail(line_number, *problem);
    }
    seen_data = true;
    last_t = t;
    const algorithms::Decision d = store.DecideNow({key, &spec, cost, t});
    auto it = totals.find(key);
    if (it == totals.end()) it = totals.emplace(std::string(key), KeyTotals{}).first;
    (d.allowed ? it->second.allowed : it->second.limited) += 1;
    fmt::print(out, "{},{},{},{},{},{},{}\n", t, key, cost, d.allowed ? "allowed" : "limited",
               d.remaining, d.retry_after_ms, d.delay_ms);
  }
  out.flush();
  for (const auto& [key, t] : totals) {
    fmt::print(err, "{}: allowed {}, limited {}\n", key, t.allowed, t.limited);
  }
  return 0;
}

}  // namespace tollgate::gateway
