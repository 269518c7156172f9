#include "rules/match_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <memory>

#include "rules/identity_config.h"
#include "rules/normalize.h"

namespace tollgate::rules {
namespace {

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// The RLS conditions of `match`: `domain = "edge"` and `descriptor = {
// key = "value" | "*" }`. A rule with them decides RLS descriptors only, so
// the HTTP request's conditions have no meaning next to them.
void ReadDescriptorMatch(TableReader& r, RuleMatch& out, ErrorList& errors) {
  if (auto s = r.String("domain")) {
    out.domain = *s;
    if (s->empty()) errors.Add(*r.Find("domain"), "\"domain\" must not be empty");
  }
  if (const toml::value* d = r.Find("descriptor")) {
    if (!d->is_table() || d->as_table().empty()) {
      errors.Add(*d, fmt::format("\"descriptor\" must be a table of entries {{ key = \"value\" "
                                 "}} (\"*\" takes any value); got {}",
                                 d->is_table() ? "an empty table" : DescribeType(*d)));
    } else {
      for (const auto& [key, value] : d->as_table()) {
        if (!value.is_table()) {
          if (auto s = ReadString(value, key, errors)) out.descriptor.emplace_back(key, *s);
          continue;
        }
        // { not = ["a", "b"] }: any value but these.
        const toml::value* values =
            value.as_table().size() == 1 && value.contains("not") ? &value.at("not") : nullptr;
        auto list = values != nullptr && values->is_array() && !values->as_array().empty()
                        ? ReadStringOrStrings(*values, "not", errors)
                        : std::nullopt;
        if (!list) {
          errors.Add(value, fmt::format("\"{}\" must be a value, \"*\" or {{ not = [\"value\", "
                                        "...] }}",
                                        key));
          continue;
        }
        out.descriptor.emplace_back(key, "*");
        out.descriptor_except.emplace_back(key, std::move(*list));
      }
      std::sort(out.descriptor.begin(), out.descriptor.end());
      std::sort(out.descriptor_except.begin(), out.descriptor_except.end());
    }
  }
  // Even an empty or malformed domain/descriptor (reported above) makes
  // this an RLS rule: its other errors are those of one.
  if (!r.Has("domain") && !r.Has("descriptor")) return;
  for (const char* key :
       {"path_prefix", "methods", "role", "ip", "host", "header", "anonymous", "not"}) {
    if (const toml::value* v = r.Find(key)) {
      errors.Add(*v, fmt::format("\"{}\" has no meaning next to \"domain\"/\"descriptor\": such "
                                 "a rule decides Envoy RLS descriptors, not HTTP requests",
                                 key));
    }
  }
}

}  // namespace

void ReadMatch(const toml::value& v, const TableSpec& spec, MatchTable which, RuleMatch& out,
               ErrorList& errors) {
  const std::string_view name = which == MatchTable::kMatch ? "match" : "not";
  if (!v.is_table()) {
    errors.Add(v, fmt::format("\"{}\" must be a table; got {}", name, DescribeType(v)));
    return;
  }
  if (which == MatchTable::kNot && v.as_table().empty()) {
    errors.Add(v, "\"not\" needs at least one condition");
    return;
  }
  TableReader r(v, spec, errors);
  if (auto s = r.String("path_prefix")) {
    if (s->empty() || s->front() != '/') {
      errors.Add(*r.Find("path_prefix"),
                 fmt::format("\"path_prefix\" must start with \"/\"; got \"{}\"", *s));
    } else if (!CanonicalPathPrefix(*s, out.path_prefix)) {
      errors.Add(*r.Find("path_prefix"), fmt::format(kNotCanonicalPath, *s));
    }
  }
  if (const toml::value* m = r.Find("methods")) {
    if (m->is_string()) {
      errors.Add(*m, fmt::format("\"methods\" must be an array of strings; got a string: write "
                                 "methods = [\"{}\"]",
                                 m->as_string().str));
    } else if (auto list = r.Strings("methods")) {
      for (const std::string& method : *list) out.methods.push_back(Upper(method));
    }
  }
  if (const toml::value* roles = r.Find("role")) {
    if (auto list = ReadStringOrStrings(*roles, "role", errors)) out.roles = *list;
  }
  if (const toml::value* ips = r.Find("ip")) out.ips = ReadCidrs(*ips, "ip", errors);
  if (auto s = r.String("host")) {
    if (!CanonicalHost(*s, out.host)) errors.Add(*r.Find("host"), fmt::format(kNotAHost, *s));
  }
  if (const toml::value* h = r.Find("header")) {
    if (!h->is_table()) {
      errors.Add(*h, fmt::format("\"header\" must be a table {{ \"Name\" = \"value\" }}; got {}",
                                 DescribeType(*h)));
    } else {
      for (const auto& [name, value] : h->as_table()) {
        auto s = ReadString(value, name, errors);
        if (s && CheckHeaderName(value, "each name in \"header\"", name, errors)) {
          out.headers.emplace_back(name, *s);
        }
      }
    }
  }
  if (auto b = r.Bool("anonymous")) out.anonymous = *b;
  if (which == MatchTable::kMatch) ReadDescriptorMatch(r, out, errors);
  if (const toml::value* n = r.Find("not")) {
    if (which == MatchTable::kNot) {
      errors.Add(*n, "\"not\" cannot hold another \"not\"");
    } else {
      auto excluded = std::make_shared<RuleMatch>();
      ReadMatch(*n, r.TableOf("not"), MatchTable::kNot, *excluded, errors);
      out.exclude = std::move(excluded);
    }
  }
  r.Finish();
}

}  // namespace tollgate::rules
