#include "rules/budget_config.h"

#include <fmt/format.h>

#include <cmath>

#include "algorithms/settle.h"

namespace tollgate::rules {
namespace {

// As deep as gateway/budget/json_fields.h follows a path, and as long.
constexpr std::size_t kMaxPathSegments = 32;
constexpr std::size_t kMaxPathBytes = 256;

// `header` or `json` of a { header = ... } / { json = ... } table, exactly
// one; false (reported) otherwise.
bool ReadSourceTable(const toml::value& table, const TableSpec& spec, std::string_view key,
                     ErrorList& errors, std::string& header, std::string& json) {
  TableReader t(table, spec, errors);
  const std::optional<std::string> h = t.HeaderName("header");
  const std::optional<std::string> j = t.String("json");
  t.Finish();
  if (h.has_value() == j.has_value()) {
    errors.Add(table, fmt::format("\"{}\" as a table names either a header or a JSON path: "
                                  "{{ header = \"X-Name\" }} or {{ json = \"a.b\" }}",
                                  key));
    return false;
  }
  if (h && h->empty()) {
    errors.Add(table, fmt::format("\"{}\": the header name is empty", key));
    return false;
  }
  if (j) {
    const std::string problem = JsonPathProblem(*j);
    if (!problem.empty()) {
      errors.Add(toml::find(table, "json"),
                 fmt::format("\"{}\": \"{}\" is not a JSON path: {}", key, *j, problem));
      return false;
    }
    json = *j;
  } else {
    header = *h;
  }
  return true;
}

// The cost's kind, its header or path, or the fixed cost into `cost`.
void ReadCost(TableReader& r, RuleBudget& out, std::int64_t& cost) {
  const std::optional<TableReader::Source> source = r.SourceOf("cost");
  if (!source) return;
  if (source->integer) {
    cost = *source->integer;
  } else if (source->table != nullptr) {
    std::string header, json;
    if (ReadSourceTable(*source->table, r.TableOf("cost"), "cost", r.errors(), header, json)) {
      out.cost = header.empty() ? CostKind::kJson : CostKind::kHeader;
      out.cost_header = std::move(header);
      out.cost_json = std::move(json);
    }
  } else if (*source->choice == "request_bytes") {
    out.cost = CostKind::kRequestBytes;
  } else {
    out.cost = *source->choice == "openai" ? CostKind::kOpenAi : CostKind::kAnthropic;
  }
}

void ReadSettle(TableReader& r, RuleBudget& out) {
  const std::optional<TableReader::Source> source = r.SourceOf("settle");
  if (!source) return;
  if (out.FromPreset()) {
    r.errors().Add(*r.Find("settle"),
                   "cost = \"openai\" and \"anthropic\" settle from the response's usage: no "
                   "\"settle\" with them");
    return;
  }
  if (source->table != nullptr) {
    std::string header, json;
    if (ReadSourceTable(*source->table, r.TableOf("settle"), "settle", r.errors(), header, json)) {
      out.settle = header.empty() ? SettleKind::kJson : SettleKind::kHeader;
      out.settle_header = std::move(header);
      out.settle_json = std::move(json);
    }
  } else {
    out.settle = SettleKind::kResponseBytes;
  }
}

// tokens, reserve and max_output_tokens: the LLM presets' own keys.
void ReadPresetKeys(TableReader& r, std::size_t prices, RuleBudget& out) {
  ErrorList& errors = r.errors();
  const bool preset = out.FromPreset();
  if (preset) out.settle = SettleKind::kUsage;
  if (auto t = r.OneOf("tokens")) {
    out.tokens = *t == "input"    ? TokenCount::kInput
                 : *t == "output" ? TokenCount::kOutput
                 : *t == "price"  ? TokenCount::kPrice
                                  : TokenCount::kTotal;
    if (out.tokens == TokenCount::kPrice && prices == 0) {
      errors.Add(*r.Find("tokens"), "tokens = \"price\" needs [[prices]] entries");
    }
  }
  if (r.OneOf("reserve")) out.reserve = Reserve::kEstimate;
  if (auto m = r.Integer("max_output_tokens")) out.max_output_tokens = *m;
  if (preset) {
    if (!r.Has("max_output_tokens")) {
      errors.Add(*r.Find("cost"),
                 "cost = \"openai\" and \"anthropic\" need \"max_output_tokens\": the output "
                 "bound reserved (and written into the request) when the request sets none");
    }
    return;
  }
  for (const char* key : {"tokens", "reserve", "max_output_tokens"}) {
    if (const toml::value* v = r.Find(key)) {
      errors.Add(*v,
                 fmt::format("\"{}\" applies to cost = \"openai\" and \"anthropic\" only", key));
    }
  }
}

}  // namespace

std::string JsonPathProblem(std::string_view path) {
  if (path.empty()) return "it is empty";
  if (path.size() > kMaxPathBytes) return fmt::format("longer than {} bytes", kMaxPathBytes);
  std::size_t segments = 1;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != '.') {
      const unsigned char c = static_cast<unsigned char>(path[i]);
      if (c < 0x20 || c == 0x7f) return "a control character";
      continue;
    }
    if (i == start) return "an empty name between dots (\"a..b\", or a dot at an end)";
    if (i < path.size()) ++segments;
    start = i + 1;
  }
  if (segments > kMaxPathSegments) {
    return fmt::format("more than {} names deep", kMaxPathSegments);
  }
  return {};
}

void ReadRuleBudget(TableReader& r, std::optional<algorithms::Algorithm> algorithm,
                    std::size_t prices, RuleConfig& rule) {
  ErrorList& errors = r.errors();
  RuleBudget& out = rule.budget;
  std::int64_t& cost = rule.cost;
  ReadCost(r, out, cost);
  if (auto d = r.Integer("cost_default")) {
    if (out.cost == CostKind::kHeader || out.cost == CostKind::kJson) {
      cost = *d;
    } else {
      errors.Add(*r.Find("cost_default"),
                 "\"cost_default\" applies to cost = { header = ... } or { json = ... } only: "
                 "the cost when the request does not say");
    }
  }
  ReadSettle(r, out);
  ReadPresetKeys(r, prices, out);
  if (rule.per == LimitUnit::kMessage && (out.cost != CostKind::kFixed || out.Settles())) {
    const toml::value* at = r.Has("settle") ? r.Find("settle") : r.Find("cost");
    errors.Add(*at,
               "per = \"message\" takes a fixed cost: a WebSocket message has no "
               "headers, body or response of its own to read one from");
    return;
  }
  if (!out.Settles() || !algorithm || algorithms::CanSettle(*algorithm)) return;
  const toml::value* at = r.Has("settle") ? r.Find("settle") : r.Find("cost");
  errors.Add(*at, fmt::format("{} cannot settle a reservation (its state does not say which "
                              "units one request took): choose another algorithm, or no "
                              "settling (docs/algorithms.md)",
                              algorithms::AlgorithmName(*algorithm)));
}

void ReadPrice(TableReader r, std::vector<ModelPrice>& out) {
  ModelPrice price;
  if (r.Require("model") != nullptr) {
    if (auto m = r.String("model")) price.model = *m;
  }
  if (auto n = r.Number("input")) price.input = *n;
  if (auto n = r.Number("output")) price.output = *n;
  if (auto u = r.OneOf("unit")) price.unit_tokens = *u == "1" ? 1 : *u == "1K" ? 1000 : 1'000'000;
  r.Finish();
  out.push_back(std::move(price));
}

}  // namespace tollgate::rules
