#include "rules/key_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "rules/budget_config.h"

namespace tollgate::rules {

std::optional<std::vector<KeyPart>> ReadKey(const toml::value& v, std::string_view name,
                                            ErrorList& errors) {
  auto list = ReadStringOrStrings(v, std::string(name), errors);
  if (!list) return std::nullopt;
  std::vector<KeyPart> parts;
  for (const std::string& text : *list) {
    KeyPart part;
    if (text == "ip") {
      part.kind = KeyPartKind::kIp;
    } else if (text == "user") {
      part.kind = KeyPartKind::kUser;
    } else if (text == "role") {
      part.kind = KeyPartKind::kRole;
    } else if (text == "global") {
      part.kind = KeyPartKind::kGlobal;
    } else if (text == "route") {
      part.kind = KeyPartKind::kRoute;
    } else if (text == "descriptor") {
      part.kind = KeyPartKind::kDescriptor;
    } else if (text.rfind("json:", 0) == 0) {
      part.kind = KeyPartKind::kJson;
      part.header = text.substr(5);
      if (const std::string problem = JsonPathProblem(part.header); !problem.empty()) {
        errors.Add(v, fmt::format("\"{}\" in \"{}\": \"{}\" is not a JSON path: {}", text, name,
                                  part.header, problem));
        return std::nullopt;
      }
    } else if (text.rfind("header:", 0) == 0 && text.size() > 7) {
      part.kind = KeyPartKind::kHeader;
      part.header = text.substr(7);
      if (!CheckHeaderName(v, fmt::format("the NAME of \"header:NAME\" in \"{}\"", name),
                           part.header, errors)) {
        return std::nullopt;
      }
    } else {
      errors.Add(
          v, fmt::format("\"{}\" parts must be \"ip\", \"user\", \"role\", \"global\", "
                         "\"route\", \"header:NAME\", \"json:PATH\" or \"descriptor\"; got \"{}\"",
                         name, text));
      return std::nullopt;
    }
    parts.push_back(part);
  }
  if (parts.empty()) {
    errors.Add(v, fmt::format("\"{}\" names no part", name));
    return std::nullopt;
  }
  // The body's parts last: a key is built up to them before the body is
  // read, and they are appended once it is (rules::AppendBodyKey).
  std::stable_partition(parts.begin(), parts.end(),
                        [](const KeyPart& part) { return part.kind != KeyPartKind::kJson; });
  return parts;
}

}  // namespace tollgate::rules
