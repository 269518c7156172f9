#include "gateway/tools/import_envoy.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "algorithms/limit.h"
#include "algorithms/validate.h"

namespace tollgate::gateway {
namespace {

// One entry of a descriptor path; an empty value matches any value (in
// envoyproxy/ratelimit, an entry without `value`) but those in `except`
// (the values its siblings of the same key name).
struct Entry {
  std::string key;
  std::string value;
  std::vector<std::string> except;
};

// yaml-cpp's marks are 0-based; a node without a place in the text (an
// empty document) has line -1 and is reported at 1:1.
ImportMessage At(const YAML::Mark& mark, std::string message) {
  return {std::max(mark.line, 0) + 1, std::max(mark.column, 0) + 1, std::move(message)};
}

// A TOML basic string (quotes included).
std::string TomlString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\u{:04X}", u);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// A TOML key: bare when TOML allows it, quoted otherwise.
std::string TomlKey(std::string_view s) {
  for (char c : s) {
    const bool bare = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '-';
    if (!bare) return TomlString(s);
  }
  return std::string(s);
}

// A rule name part: printable ASCII (the RateLimit fields' strings), with
// the separators '/' and '=' and the escape '%' itself percent-encoded so
// that different paths never give the same name.
std::string NamePart(std::string_view s) {
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f || c == '%' || c == '/' || c == '=') {
      out += fmt::format("%{:02X}", u);
    } else {
      out += c;
    }
  }
  return out;
}

// envoyproxy/ratelimit's units (a month of 30 days, a year of 365), as
// tollgate windows.
struct Unit {
  std::string_view name;
  std::string_view window;
  std::int64_t window_ms;
};
constexpr Unit kUnits[] = {{"second", "1s", 1000},
                           {"minute", "1m", 60'000},
                           {"hour", "1h", 3'600'000},
                           {"day", "1d", 86'400'000},
                           {"week", "7d", 7 * 86'400'000LL},
                           {"month", "30d", 30 * 86'400'000LL},
                           {"year", "365d", 365 * 86'400'000LL}};

// Reads a whole configuration, noting every error and warning and going on
// after each (a descriptor with an error gives no rule).
class Importer {
 public:
  explicit Importer(std::string domain) : domain_(std::move(domain)) {}

  void Descriptors(const YAML::Node& list, std::vector<Entry>& path) {
    if (!list.IsSequence()) return Error(list, "\"descriptors\" must be a list");
    // First the entries of this level: an entry without a value takes every
    // value but those of its siblings with the same key.
    std::vector<std::optional<Entry>> entries;
    std::map<std::string, std::set<std::string>> values;
    std::set<std::string> any;
    for (const YAML::Node& descriptor : list) {
      std::optional<Entry>& entry = entries.emplace_back(ReadEntry(descriptor, path));
      if (!entry) continue;
      const bool fresh = entry->value.empty() ? any.insert(entry->key).second
                                              : values[entry->key].insert(entry->value).second;
      if (!fresh) {
        // envoyproxy/ratelimit refuses it too ("duplicate descriptor composite key").
        Error(descriptor, fmt::format("descriptor {}{} is defined twice at one level", entry->key,
                                      entry->value.empty() ? "" : "=" + entry->value));
        entry.reset();
      }
    }
    std::size_t i = 0;
    for (const YAML::Node& descriptor : list) {
      std::optional<Entry>& entry = entries[i++];
      if (!entry) continue;
      if (entry->value.empty()) {
        const std::set<std::string>& taken = values[entry->key];
        entry->except.assign(taken.begin(), taken.end());
      }
      path.push_back(std::move(*entry));
      Descriptor(descriptor, path);
      path.pop_back();
    }
  }

  void Error(const YAML::Node& at, std::string message) {
    errors_.push_back(At(at.Mark(), std::move(message)));
  }
  void Warn(const YAML::Node& at, std::string message) {
    warnings_.push_back(At(at.Mark(), std::move(message)));
  }

  std::string& toml() { return out_; }
  std::vector<ImportMessage>& errors() { return errors_; }
  std::vector<ImportMessage>& warnings() { return warnings_; }

 private:
  // A non-empty string scalar, or an error naming `what`.
  std::optional<std::string> String(const YAML::Node& node, std::string_view what) {
    if (node.IsScalar() && !node.Scalar().empty()) return node.Scalar();
    Error(node, fmt::format("\"{}\" must be a non-empty string", what));
    return std::nullopt;
  }

  std::optional<bool> Bool(const YAML::Node& node, std::string_view what) {
    bool b = false;
    if (node.IsScalar() && YAML::convert<bool>::decode(node, b)) return b;
    Error(node, fmt::format("\"{}\" must be true or false", what));
    return std::nullopt;
  }

  // The descriptor's key and value, its fields checked; nullopt when it
  // cannot be placed (then reported).
  std::optional<Entry> ReadEntry(const YAML::Node& d, const std::vector<Entry>& path) {
    if (!d.IsMap()) {
      Error(d, "a descriptor must be a mapping with \"key\"");
      return std::nullopt;
    }
    bool good = true;
    for (const auto& field : d) {
      const std::string name = field.first.Scalar();
      if (name == "detailed_metric" || name == "value_to_metric") {
        Warn(field.first, fmt::format("\"{}\" is left out: tollgate's metrics count per rule "
                                      "(tollgate_ratelimit_decisions_total), and the admin API "
                                      "shows the most limited keys",
                                      name));
      } else if (name != "key" && name != "value" && name != "rate_limit" &&
                 name != "descriptors" && name != "shadow_mode") {
        Error(field.first, fmt::format("unknown descriptor field \"{}\"", name));
        good = false;
      }
    }
    if (!d["key"]) {
      Error(d, "a descriptor needs \"key\"");
      return std::nullopt;
    }
    std::optional<std::string> key = String(d["key"], "key");
    if (!key) return std::nullopt;
    Entry entry{*key, "", {}};
    if (const YAML::Node value = d["value"]) {
      if (!value.IsScalar()) {
        Error(value, "\"value\" must be a string");
        return std::nullopt;
      }
      entry.value = value.Scalar();
      // envoyproxy/ratelimit reads a trailing '*' as a prefix match, which
      // tollgate's descriptor match (equal, or any value) has no form for.
      if (entry.value.size() > 1 && entry.value.back() == '*') {
        Error(value, fmt::format("value \"{}\" is a prefix match; tollgate matches a value "
                                 "exactly or any value (\"*\")",
                                 entry.value));
        return std::nullopt;
      }
      if (entry.value == "*") entry.value.clear();
    }
    for (const Entry& e : path) {
      if (e.key == entry.key) {
        Error(d["key"], fmt::format("key \"{}\" appears twice in one descriptor path; a tollgate "
                                    "descriptor match names each key once",
                                    entry.key));
        return std::nullopt;
      }
    }
    if (!good) return std::nullopt;
    return entry;
  }

  // The descriptor whose entry is path.back().
  void Descriptor(const YAML::Node& d, std::vector<Entry>& path) {
    bool shadow = false;
    if (d["shadow_mode"]) shadow = Bool(d["shadow_mode"], "shadow_mode").value_or(false);
    if (const YAML::Node rate_limit = d["rate_limit"]) Rule(rate_limit, path, shadow);
    if (const YAML::Node children = d["descriptors"]) Descriptors(children, path);
  }

  // The rule's match and name, for the path.
  std::string Head(const std::vector<Entry>& path) const {
    std::string rule_name = NamePart(domain_);
    std::string descriptor;
    for (const Entry& e : path) {
      rule_name += "/" + NamePart(e.key);
      if (!e.value.empty()) rule_name += "=" + NamePart(e.value);
      if (!descriptor.empty()) descriptor += ", ";
      descriptor += TomlKey(e.key) + " = ";
      if (!e.value.empty()) {
        descriptor += TomlString(e.value);
      } else if (e.except.empty()) {
        descriptor += "\"*\"";
      } else {
        std::string values;
        for (const std::string& v : e.except) {
          values += (values.empty() ? "" : ", ") + TomlString(v);
        }
        descriptor += "{ not = [" + values + "] }";
      }
    }
    return fmt::format("\n[[rules]]\nname = {}\nmatch = {{ domain = {}, descriptor = {{ {} }} }}\n",
                       TomlString(rule_name), TomlString(domain_), descriptor);
  }

  void Rule(const YAML::Node& rate_limit, const std::vector<Entry>& path, bool shadow) {
    if (!rate_limit.IsMap()) return Error(rate_limit, "\"rate_limit\" must be a mapping");
    const std::size_t errors = errors_.size();
    for (const auto& field : rate_limit) {
      const std::string name = field.first.Scalar();
      if (name == "replaces") {
        Error(field.first, "\"replaces\" has no tollgate equivalent: every matching rule applies");
      } else if (name == "name") {
        Warn(field.first, "\"name\" is left out: the rule is named after its descriptor path");
      } else if (name != "unit" && name != "requests_per_unit" && name != "unlimited") {
        Error(field.first, fmt::format("unknown rate_limit field \"{}\"", name));
      }
    }
    std::optional<bool> unlimited = false;
    if (rate_limit["unlimited"]) unlimited = Bool(rate_limit["unlimited"], "unlimited");
    if (!unlimited) return;
    if (*unlimited) {
      // As envoyproxy/ratelimit: a unit goes against it, a count is not read.
      if (rate_limit["unit"]) Error(rate_limit["unit"], "\"unit\" goes against unlimited");
      if (rate_limit["requests_per_unit"]) {
        Warn(rate_limit["requests_per_unit"], "\"requests_per_unit\" is not read with unlimited");
      }
      if (errors_.size() == errors) out_ += Head(path) + "exempt = true\n";
      return;
    }
    const Unit* window = ReadUnit(rate_limit);
    const std::optional<std::uint32_t> limit = ReadRequests(rate_limit);
    if (window == nullptr || !limit) return;
    // The loader's own bounds, so that the TOML printed always loads.
    algorithms::LimitParams params;
    params.algorithm = algorithms::Algorithm::kFixedWindow;
    params.limit = *limit;
    params.window_ms = window->window_ms;
    if (auto problem = algorithms::ValidateLimit(params)) {
      return Error(rate_limit["requests_per_unit"], *problem);
    }
    if (errors_.size() != errors) return;
    out_ += Head(path);
    out_ += fmt::format(
        "key = \"descriptor\"\nalgorithm = \"fixed_window\"\nlimit = {}\nwindow = \"{}\"\n", *limit,
        window->window);
    if (shadow) out_ += "action = \"dry_run\"\n";
  }

  const Unit* ReadUnit(const YAML::Node& rate_limit) {
    const YAML::Node unit = rate_limit["unit"];
    if (!unit) {
      Error(rate_limit, "rate_limit needs \"unit\"");
      return nullptr;
    }
    std::optional<std::string> name = String(unit, "unit");
    if (!name) return nullptr;
    // envoyproxy/ratelimit reads the unit in any case.
    for (char& c : *name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const Unit& u : kUnits) {
      if (u.name == *name) return &u;
    }
    Error(unit, fmt::format("unknown unit \"{}\": second, minute, hour, day, week, month or year",
                            unit.Scalar()));
    return nullptr;
  }

  // A uint32 in envoyproxy/ratelimit; 0 refuses every request there.
  std::optional<std::uint32_t> ReadRequests(const YAML::Node& rate_limit) {
    const YAML::Node requests = rate_limit["requests_per_unit"];
    if (!requests) {
      Error(rate_limit, "rate_limit needs \"requests_per_unit\"");
      return std::nullopt;
    }
    const std::string text = requests.IsScalar() ? requests.Scalar() : "";
    std::uint32_t limit = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), limit);
    if (ec != std::errc() || end != text.data() + text.size()) {
      Error(requests, fmt::format("\"requests_per_unit\" must be an integer from 0 to {}; got "
                                  "\"{}\"",
                                  UINT32_MAX, text));
      return std::nullopt;
    }
    return limit;
  }

  std::string domain_;
  std::string out_;
  std::vector<ImportMessage> errors_;
  std::vector<ImportMessage> warnings_;
};

}  // namespace

ImportResult ImportEnvoyRatelimit(std::string_view yaml, std::string_view file_name) {
  ImportResult result;
  const auto in_file_order = [](std::vector<ImportMessage>& list) {
    std::stable_sort(list.begin(), list.end(), [](const ImportMessage& a, const ImportMessage& b) {
      return std::tie(a.line, a.column) < std::tie(b.line, b.column);
    });
  };
  try {
    const YAML::Node root = YAML::Load(std::string(yaml));
    if (!root.IsMap()) {
      result.errors.push_back(
          At(root.Mark(), "the configuration must be a mapping with \"domain\""));
      return result;
    }
    std::optional<std::string> domain;
    if (!root["domain"]) {
      result.errors.push_back(At(root.Mark(), "\"domain\" is required"));
    } else if (root["domain"].IsScalar() && !root["domain"].Scalar().empty()) {
      domain = root["domain"].Scalar();
    } else {
      result.errors.push_back(At(root["domain"].Mark(), "\"domain\" must be a non-empty string"));
    }
    Importer importer(domain.value_or(""));
    for (const auto& field : root) {
      const std::string name = field.first.Scalar();
      if (name != "domain" && name != "descriptors") {
        importer.Error(field.first,
                       fmt::format("unknown field \"{}\": expected domain and descriptors", name));
      }
    }
    std::vector<Entry> path;
    if (const YAML::Node descriptors = root["descriptors"]) importer.Descriptors(descriptors, path);
    result.errors.insert(result.errors.end(), importer.errors().begin(), importer.errors().end());
    result.warnings = std::move(importer.warnings());
    result.toml =
        fmt::format("# From {} (envoyproxy/ratelimit) by tollgate import envoy-ratelimit.\n",
                    file_name) +
        importer.toml();
  } catch (const YAML::Exception& e) {
    // Malformed YAML: nothing after it can be read.
    result.errors.push_back(At(e.mark, e.msg));
  }
  in_file_order(result.errors);
  in_file_order(result.warnings);
  return result;
}

}  // namespace tollgate::gateway
