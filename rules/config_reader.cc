#include "rules/config_reader.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <fstream>

namespace tollgate::rules {

std::string ConfigError::ToString() const {
  // Line 0: an error of the whole file (it cannot be read), whose message
  // names the file.
  if (line == 0) return message;
  return fmt::format("{}:{}:{}: {}", file, line, column, message);
}

void ErrorList::Add(const toml::value& at, std::string message) {
  const toml::source_location loc = at.location();
  errors_.push_back({loc.file_name(), loc.line(), loc.column(), std::move(message)});
}

std::string_view DescribeType(const toml::value& value) {
  switch (value.type()) {
    case toml::value_t::boolean:
      return "a boolean";
    case toml::value_t::integer:
      return "an integer";
    case toml::value_t::floating:
      return "a float";
    case toml::value_t::string:
      return "a string";
    case toml::value_t::array:
      return "an array";
    case toml::value_t::table:
      return "a table";
    case toml::value_t::empty:
      return "nothing";
    default:
      return "a date or time";
  }
}

std::optional<std::string> ReadString(const toml::value& v, std::string_view name,
                                      ErrorList& errors) {
  if (!v.is_string()) {
    errors.Add(v, fmt::format("\"{}\" must be a string; got {}", name, DescribeType(v)));
    return std::nullopt;
  }
  return v.as_string().str;
}

bool CheckHeaderName(const toml::value& at, std::string_view what, std::string_view text,
                     ErrorList& errors) {
  if (IsHeaderName(text)) return true;
  errors.Add(at, fmt::format("{} must be {}; got \"{}\"", what, kHeaderNameRule, text));
  return false;
}

std::optional<std::int64_t> ReadDurationMs(const toml::value& v, std::string_view name,
                                           ErrorList& errors, std::int64_t min_ms) {
  const Duration d =
      v.is_string() ? ReadDuration(v.as_string().str) : Duration{0, DurationProblem::kSyntax};
  if (d.problem != DurationProblem::kNone) {
    errors.Add(v, fmt::format("\"{}\" {}; got {}", name, DescribeDurationProblem(d.problem),
                              v.is_string() ? "\"" + v.as_string().str + "\""
                                            : std::string(DescribeType(v))));
    return std::nullopt;
  }
  if (d.ms < min_ms) {
    errors.Add(v, fmt::format("\"{}\" must be at least {}ms; got {}ms", name, min_ms, d.ms));
    return std::nullopt;
  }
  return d.ms;
}

std::optional<std::vector<std::string>> ReadStringOrStrings(const toml::value& v,
                                                            std::string_view name,
                                                            ErrorList& errors) {
  if (v.is_string()) return std::vector<std::string>{v.as_string().str};
  if (!v.is_array()) {
    errors.Add(v, fmt::format("\"{}\" must be a string or an array of strings; got {}", name,
                              DescribeType(v)));
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (const toml::value& item : v.as_array()) {
    auto s = ReadString(item, name, errors);
    if (!s) return std::nullopt;
    out.push_back(*s);
  }
  return out;
}

void CheckReadable(const toml::value& at, const std::string& file, std::string_view what,
                   ErrorList& errors) {
  std::ifstream in(file);
  if (!in) errors.Add(at, fmt::format("cannot read {} \"{}\"", what, file));
}

TableReader::TableReader(const toml::value& table, const TableSpec& spec, ErrorList& errors)
    : table_(table), spec_(spec), errors_(errors) {}

const KeySpec* TableReader::Spec(std::string_view key, std::initializer_list<KeyType> types) {
  const KeySpec* spec = spec_.Find(key);
  if (spec == nullptr) {
    errors_.Add(table_, fmt::format("internal error: the reader reads \"{}\", which table \"{}\" "
                                    "of rules/config_keys.cc does not list",
                                    key, spec_.name));
    return nullptr;
  }
  if (types.size() != 0 && std::find(types.begin(), types.end(), spec->type) == types.end()) {
    errors_.Add(table_, fmt::format("internal error: the reader reads \"{}\" as another type "
                                    "than table \"{}\" of rules/config_keys.cc lists",
                                    key, spec_.name));
    return nullptr;
  }
  return spec;
}

bool TableReader::Has(std::string_view key) const {
  return table_.is_table() && table_.as_table().count(std::string(key)) != 0;
}

const toml::value* TableReader::FindAs(std::string_view key, std::initializer_list<KeyType> types) {
  if (Spec(key, types) == nullptr || !table_.is_table()) return nullptr;
  const auto& t = table_.as_table();
  auto it = t.find(std::string(key));
  if (it == t.end()) return nullptr;
  used_.insert(std::string(key));
  return &it->second;
}

const toml::value* TableReader::Find(std::string_view key) { return FindAs(key, {}); }

const toml::value* TableReader::Require(std::string_view key) {
  const KeySpec* spec = Spec(key, {});
  if (spec != nullptr && spec->presence == Presence::kOptional) {
    errors_.Add(table_, fmt::format("internal error: the reader requires \"{}\", which table "
                                    "\"{}\" of rules/config_keys.cc lists as optional",
                                    key, spec_.name));
  }
  const toml::value* v = Find(key);
  if (v == nullptr) errors_.Add(table_, fmt::format("missing required key \"{}\"", key));
  return v;
}

const TableSpec& TableReader::TableOf(std::string_view key) {
  static constexpr TableSpec kNoTable{"none", {}};
  const KeySpec* spec =
      Spec(key, {KeyType::kTable, KeyType::kTables, KeyType::kTableOrTables, KeyType::kSource});
  return spec != nullptr ? *spec->table : kNoTable;
}

std::optional<std::string> TableReader::String(std::string_view key) {
  const toml::value* v = FindAs(key, {KeyType::kString});
  if (v == nullptr) return std::nullopt;
  return ReadString(*v, key, errors_);
}

std::optional<double> TableReader::Number(std::string_view key) {
  const toml::value* v = FindAs(key, {KeyType::kNumber});
  if (v == nullptr) return std::nullopt;
  if (!v->is_integer() && !v->is_floating()) {
    errors_.Add(*v, fmt::format("\"{}\" must be a number; got {}", key, DescribeType(*v)));
    return std::nullopt;
  }
  const double n = v->is_integer() ? static_cast<double>(v->as_integer()) : v->as_floating();
  const KeySpec& spec = *spec_.Find(key);
  if (!(n >= static_cast<double>(spec.min)) || !std::isfinite(n)) {
    errors_.Add(
        *v, fmt::format("\"{}\" must be a finite number of at least {}; got {}", key, spec.min, n));
    return std::nullopt;
  }
  return n;
}

std::optional<TableReader::Source> TableReader::SourceOf(std::string_view key) {
  const toml::value* v = FindAs(key, {KeyType::kSource});
  if (v == nullptr) return std::nullopt;
  const KeySpec& spec = *spec_.Find(key);
  const std::string expected =
      fmt::format("{}one of \"{}\" or a table", spec.max > 0 ? "an integer, " : "",
                  fmt::join(spec.choices, "\", \""));
  Source out;
  if (v->is_table()) {
    out.table = v;
  } else if (v->is_string()) {
    const std::string& text = v->as_string().str;
    if (std::find(spec.choices.begin(), spec.choices.end(), text) == spec.choices.end()) {
      errors_.Add(*v, fmt::format("\"{}\" must be {}; got \"{}\"", key, expected, text));
      return std::nullopt;
    }
    out.choice = text;
  } else if (v->is_integer() && spec.max > 0) {
    const std::int64_t n = v->as_integer();
    if (n < spec.min || n > spec.max) {
      errors_.Add(
          *v, fmt::format("\"{}\" must be between {} and {}; got {}", key, spec.min, spec.max, n));
      return std::nullopt;
    }
    out.integer = n;
  } else {
    errors_.Add(*v, fmt::format("\"{}\" must be {}; got {}", key, expected, DescribeType(*v)));
    return std::nullopt;
  }
  return out;
}

std::optional<std::int64_t> TableReader::Integer(std::string_view key) {
  const toml::value* v = FindAs(key, {KeyType::kInteger});
  if (v == nullptr) return std::nullopt;
  if (!v->is_integer()) {
    errors_.Add(*v, fmt::format("\"{}\" must be an integer; got {}", key, DescribeType(*v)));
    return std::nullopt;
  }
  return InRange(*v, key);
}

std::optional<std::vector<std::pair<std::string, std::int64_t>>> TableReader::IntegerTable(
    std::string_view key) {
  const toml::value* v = FindAs(key, {KeyType::kIntegerTable});
  if (v == nullptr) return std::nullopt;
  if (!v->is_table()) {
    errors_.Add(*v, fmt::format("\"{}\" must be a table; got {}", key, DescribeType(*v)));
    return std::nullopt;
  }
  std::vector<std::pair<std::string, std::int64_t>> out;
  bool good = true;
  for (const auto& [name, value] : v->as_table()) {
    if (!value.is_integer()) {
      errors_.Add(value, fmt::format("each value of \"{}\" must be an integer; got {}", key,
                                     DescribeType(value)));
      good = false;
    } else if (auto n = InRange(value, key)) {
      out.emplace_back(name, *n);
    } else {
      good = false;
    }
  }
  if (!good) return std::nullopt;
  return out;
}

std::optional<std::int64_t> TableReader::InRange(const toml::value& v, std::string_view key) {
  const KeySpec& spec = *spec_.Find(key);
  const std::int64_t n = v.as_integer();
  if (n < spec.min || n > spec.max) {
    errors_.Add(
        v, fmt::format("\"{}\" must be between {} and {}; got {}", key, spec.min, spec.max, n));
    return std::nullopt;
  }
  return n;
}

std::optional<bool> TableReader::Bool(std::string_view key) {
  const toml::value* v = FindAs(key, {KeyType::kBool});
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) {
    errors_.Add(*v, fmt::format("\"{}\" must be true or false; got {}", key, DescribeType(*v)));
    return std::nullopt;
  }
  return v->as_boolean();
}

std::optional<std::int64_t> TableReader::DurationMs(std::string_view key) {
  const toml::value* v = FindAs(key, {KeyType::kDuration});
  if (v == nullptr) return std::nullopt;
  return ReadDurationMs(*v, key, errors_, spec_.Find(key)->min);
}

std::optional<HostPort> TableReader::Address(std::string_view key) {
  const toml::value* v = FindAs(key, {KeyType::kAddress});
  if (v == nullptr) return std::nullopt;
  auto text = ReadString(*v, key, errors_);
  if (!text) return std::nullopt;
  auto hp = ParseHostPort(*text);
  if (!hp) {
    errors_.Add(*v, fmt::format("\"{}\" must be an address \"host:port\"; got \"{}\"", key, *text));
  }
  return hp;
}

std::optional<std::string> TableReader::HeaderName(std::string_view key) {
  const toml::value* v = FindAs(key, {KeyType::kHeaderName});
  if (v == nullptr) return std::nullopt;
  std::optional<std::string> text = ReadString(*v, key, errors_);
  if (!text ||
      (!text->empty() && !CheckHeaderName(*v, fmt::format("\"{}\"", key), *text, errors_))) {
    return std::nullopt;
  }
  return text;
}

std::optional<std::vector<std::string>> TableReader::Strings(std::string_view key) {
  const toml::value* v = FindAs(key, {KeyType::kStrings});
  if (v == nullptr) return std::nullopt;
  if (!v->is_array()) {
    errors_.Add(*v,
                fmt::format("\"{}\" must be an array of strings; got {}", key, DescribeType(*v)));
    return std::nullopt;
  }
  std::vector<std::string> out;
  bool ok = true;
  for (const toml::value& item : v->as_array()) {
    auto s = ReadString(item, key, errors_);
    if (s) {
      out.push_back(*s);
    } else {
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return out;
}

std::optional<std::string> TableReader::OneOf(std::string_view key) {
  const toml::value* v = FindAs(key, {KeyType::kChoice});
  if (v == nullptr) return std::nullopt;
  const std::span<const std::string_view> choices = spec_.Find(key)->choices;
  auto s = ReadString(*v, key, errors_);
  if (!s) return std::nullopt;
  for (std::string_view c : choices) {
    if (c == *s) return s;
  }
  errors_.Add(
      *v, fmt::format("\"{}\" must be one of {}; got \"{}\"", key, fmt::join(choices, ", "), *s));
  return std::nullopt;
}

std::optional<TableReader::IntegerOrChoice> TableReader::IntegerOrOneOf(std::string_view key) {
  const toml::value* v = FindAs(key, {KeyType::kIntegerOrChoice});
  if (v == nullptr) return std::nullopt;
  IntegerOrChoice out;
  if (v->is_integer()) {
    const std::optional<std::int64_t> n = InRange(*v, key);
    if (!n) return std::nullopt;
    out.number = *n;
    return out;
  }
  const KeySpec& spec = *spec_.Find(key);
  if (v->is_string()) {
    out.choice = v->as_string().str;
    for (std::string_view c : spec.choices) {
      if (c == out.choice) return out;
    }
  }
  errors_.Add(
      *v, fmt::format("\"{}\" must be an integer or \"{}\"; got {}", key,
                      fmt::join(spec.choices, "\", \""),
                      v->is_string() ? "\"" + out.choice + "\"" : std::string(DescribeType(*v))));
  return std::nullopt;
}

void TableReader::Finish() {
  if (!table_.is_table()) return;
  for (const auto& [key, value] : table_.as_table()) {
    // Keys the table lists but the reader left unread mean nothing where
    // they stand (a listener-wide TLS key in a second certificate): as unknown.
    if (spec_.Find(key) == nullptr || used_.count(key) == 0)
      errors_.Add(value, fmt::format("unknown key \"{}\"", key));
  }
}

}  // namespace tollgate::rules
