#include "gateway/tools/import_envoy.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "algorithms/limit.h"
#include "algorithms/validate.h"

namespace tollgate::gateway {
namespace {

// One entry of a descriptor path; an empty value matches any value (in
// envoyproxy/ratelimit, an entry without `value`).
struct Entry {
  std::string key;
  std::string value;
};

// Thrown inside this file only, to stop at the first thing that cannot be
// translated; ImportEnvoyRatelimit turns it into an ImportError.
struct Failure {
  int line;
  std::string message;
};

// yaml-cpp's marks are 0-based; a node without a place in the text (an
// empty document) has line -1 and is reported on line 1.
int LineOf(int mark_line) { return std::max(mark_line, 0) + 1; }
int LineOf(const YAML::Node& node) { return LineOf(node.Mark().line); }

[[noreturn]] void Fail(const YAML::Node& at, std::string message) {
  throw Failure{LineOf(at), std::move(message)};
}

// A non-empty string scalar, or a failure naming `what`.
std::string RequireString(const YAML::Node& node, std::string_view what) {
  if (!node.IsScalar() || node.Scalar().empty()) {
    Fail(node, fmt::format("\"{}\" must be a non-empty string", what));
  }
  return node.Scalar();
}

bool ReadBool(const YAML::Node& node, std::string_view what) {
  try {
    return node.as<bool>();
  } catch (const YAML::BadConversion&) {
    Fail(node, fmt::format("\"{}\" must be true or false", what));
  }
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

// envoyproxy/ratelimit's units, as tollgate windows.
struct Unit {
  std::string_view name;
  std::string_view window;
  std::int64_t window_ms;
};
constexpr Unit kUnits[] = {{"second", "1s", 1000},
                           {"minute", "1m", 60'000},
                           {"hour", "1h", 3'600'000},
                           {"day", "1d", 86'400'000}};

class Importer {
 public:
  explicit Importer(std::string domain) : domain_(std::move(domain)) {}

  void Descriptors(const YAML::Node& list, std::vector<Entry>& path) {
    if (!list.IsSequence()) Fail(list, "\"descriptors\" must be a list");
    // Per key at this level: whether an entry without a value was seen, and
    // the values seen.
    std::map<std::string, std::pair<bool, std::set<std::string>>> seen;
    for (const YAML::Node& descriptor : list) {
      if (!descriptor.IsMap()) Fail(descriptor, "a descriptor must be a mapping with \"key\"");
      Descriptor(descriptor, path, seen);
    }
  }

  std::string Toml() && { return std::move(out_); }

 private:
  void Descriptor(const YAML::Node& d, std::vector<Entry>& path,
                  std::map<std::string, std::pair<bool, std::set<std::string>>>& seen) {
    for (const auto& field : d) {
      const std::string name = field.first.Scalar();
      if (name != "key" && name != "value" && name != "rate_limit" && name != "descriptors" &&
          name != "shadow_mode" && name != "detailed_metric" && name != "value_to_metric") {
        Fail(field.first, fmt::format("unknown descriptor field \"{}\"", name));
      }
    }
    if (!d["key"]) Fail(d, "a descriptor needs \"key\"");
    Entry entry{RequireString(d["key"], "key"), ""};
    if (const YAML::Node value = d["value"]) {
      if (!value.IsScalar()) Fail(value, "\"value\" must be a string");
      entry.value = value.Scalar();
      // envoyproxy/ratelimit reads a trailing '*' as a prefix match, which
      // tollgate's descriptor match (equal, or "*" for any) has no form for.
      if (entry.value.size() > 1 && entry.value.back() == '*') {
        Fail(value, fmt::format("value \"{}\" is a prefix match; tollgate matches a value exactly "
                                "or any value (\"*\")",
                                entry.value));
      }
      if (entry.value == "*") entry.value.clear();
    }
    for (const Entry& e : path) {
      if (e.key == entry.key) {
        Fail(d["key"], fmt::format("key \"{}\" appears twice in one descriptor path; a tollgate "
                                   "descriptor match names each key once",
                                   entry.key));
      }
    }
    // envoyproxy/ratelimit prefers an entry with the request's value to one
    // without a value; tollgate applies every matching rule, so both would.
    auto& [any_seen, values] = seen[entry.key];
    if (entry.value.empty() ? !values.empty() : any_seen) {
      Fail(d, fmt::format("key \"{}\" has entries both with and without a value at one level: "
                          "envoyproxy/ratelimit takes the one with the value, tollgate would "
                          "apply both",
                          entry.key));
    }
    if (entry.value.empty() ? any_seen : values.count(entry.value) != 0) {
      Fail(d, fmt::format("descriptor {}{} is defined twice at one level", entry.key,
                          entry.value.empty() ? "" : "=" + entry.value));
    }
    if (entry.value.empty()) {
      any_seen = true;
    } else {
      values.insert(entry.value);
    }

    path.push_back(entry);
    const bool shadow = d["shadow_mode"] && ReadBool(d["shadow_mode"], "shadow_mode");
    if (const YAML::Node rate_limit = d["rate_limit"]) Rule(rate_limit, path, shadow);
    if (const YAML::Node children = d["descriptors"]) Descriptors(children, path);
    path.pop_back();
  }

  void Rule(const YAML::Node& rate_limit, const std::vector<Entry>& path, bool shadow) {
    if (!rate_limit.IsMap()) Fail(rate_limit, "\"rate_limit\" must be a mapping");
    for (const auto& field : rate_limit) {
      const std::string name = field.first.Scalar();
      if (name == "replaces") {
        Fail(field.first, "\"replaces\" has no tollgate equivalent: every matching rule applies");
      }
      if (name != "unit" && name != "requests_per_unit" && name != "unlimited" && name != "name") {
        Fail(field.first, fmt::format("unknown rate_limit field \"{}\"", name));
      }
    }
    std::string rule_name = NamePart(domain_);
    std::string descriptor;
    for (const Entry& e : path) {
      rule_name += "/" + NamePart(e.key);
      if (!e.value.empty()) rule_name += "=" + NamePart(e.value);
      if (!descriptor.empty()) descriptor += ", ";
      descriptor += TomlKey(e.key) + " = " + TomlString(e.value.empty() ? "*" : e.value);
    }
    out_ +=
        fmt::format("\n[[rules]]\nname = {}\nmatch = {{ domain = {}, descriptor = {{ {} }} }}\n",
                    TomlString(rule_name), TomlString(domain_), descriptor);

    if (rate_limit["unlimited"] && ReadBool(rate_limit["unlimited"], "unlimited")) {
      // As in envoyproxy/ratelimit, an unlimited entry states no rate.
      for (const char* key : {"unit", "requests_per_unit"}) {
        if (rate_limit[key]) {
          Fail(rate_limit[key], fmt::format("\"{}\" goes against unlimited", key));
        }
      }
      out_ += "exempt = true\n";
      return;
    }
    if (!rate_limit["unit"]) Fail(rate_limit, "rate_limit needs \"unit\"");
    if (!rate_limit["requests_per_unit"]) {
      Fail(rate_limit, "rate_limit needs \"requests_per_unit\"");
    }
    const YAML::Node unit = rate_limit["unit"];
    std::string unit_name = RequireString(unit, "unit");
    // envoyproxy/ratelimit reads the unit in any case.
    for (char& c : unit_name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const Unit* window = nullptr;
    for (const Unit& u : kUnits) {
      if (u.name == unit_name) window = &u;
    }
    if (window == nullptr) {
      Fail(unit, fmt::format("unknown unit \"{}\": second, minute, hour or day", unit.Scalar()));
    }
    const YAML::Node requests = rate_limit["requests_per_unit"];
    const std::string text = requests.IsScalar() ? requests.Scalar() : "";
    std::uint32_t limit = 0;  // a uint32 in envoyproxy/ratelimit
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), limit);
    if (ec != std::errc() || end != text.data() + text.size() || limit == 0) {
      Fail(requests,
           fmt::format("\"requests_per_unit\" must be an integer from 1 to {}; got \"{}\"",
                       UINT32_MAX, text));
    }
    // The loader's own bounds, so that the TOML printed always loads.
    algorithms::LimitParams params;
    params.algorithm = algorithms::Algorithm::kFixedWindow;
    params.limit = limit;
    params.window_ms = window->window_ms;
    if (auto problem = algorithms::ValidateLimit(params)) Fail(requests, *problem);
    out_ += fmt::format(
        "key = \"descriptor\"\nalgorithm = \"fixed_window\"\nlimit = {}\nwindow = \"{}\"\n", limit,
        window->window);
    if (shadow) out_ += "action = \"dry_run\"\n";
  }

  std::string domain_;
  std::string out_;
};

}  // namespace

ImportResult ImportEnvoyRatelimit(std::string_view yaml, std::string_view file_name) {
  ImportResult result;
  try {
    const YAML::Node root = YAML::Load(std::string(yaml));
    if (!root.IsMap()) Fail(root, "the configuration must be a mapping with \"domain\"");
    for (const auto& field : root) {
      const std::string name = field.first.Scalar();
      if (name != "domain" && name != "descriptors") {
        Fail(field.first,
             fmt::format("unknown field \"{}\": expected domain and descriptors", name));
      }
    }
    if (!root["domain"]) Fail(root, "\"domain\" is required");
    Importer importer(RequireString(root["domain"], "domain"));
    std::vector<Entry> path;
    if (const YAML::Node descriptors = root["descriptors"]) importer.Descriptors(descriptors, path);
    result.toml =
        fmt::format("# From {} (envoyproxy/ratelimit) by tollgate import envoy-ratelimit.\n",
                    file_name) +
        std::move(importer).Toml();
  } catch (const Failure& f) {
    result.error = ImportError{f.line, f.message};
  } catch (const YAML::Exception& e) {
    result.error = ImportError{LineOf(e.mark.line), e.msg};
  }
  return result;
}

}  // namespace tollgate::gateway
