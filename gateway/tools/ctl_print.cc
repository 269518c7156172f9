#include "gateway/tools/ctl_print.h"

#include <algorithm>
#include <boost/json/serialize.hpp>
#include <cstddef>
#include <ostream>
#include <vector>

#include "gateway/telemetry/utf8.h"

namespace tollgate::gateway::ctl {
namespace {

namespace json = boost::json;

// Columns padded to their widest cell, two spaces apart.
void PrintTable(const std::vector<std::vector<std::string>>& rows, std::ostream& out) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (std::size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line.append(widths[c] - row[c].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  }
}

}  // namespace

std::string Text(const json::value& v) {
  if (v.is_string()) return TerminalText(v.as_string());
  return TerminalText(json::serialize(v));
}

std::string Seconds(const json::value& ms) { return std::to_string((ms.as_int64() + 999) / 1000); }

namespace {

void PrintRules(const json::object& doc, std::ostream& out) {
  std::vector<std::vector<std::string>> rows = {{"RULE", "KEY", "LIMITS", "ACTION"}};
  for (const json::value& v : doc.at("rules").as_array()) {
    const json::object& rule = v.as_object();
    std::vector<std::string> row = {Text(rule.at("name")), "", "", ""};
    if (rule.contains("exempt")) {
      row[2] = "exempt";
      rows.push_back(std::move(row));
      continue;
    }
    for (const json::value& part : rule.at("key").as_array()) {
      row[1] += (row[1].empty() ? "" : "+") + Text(part);
    }
    if (rule.contains("max_inflight")) {
      row[2] = "max_inflight " + Text(rule.at("max_inflight"));
    } else {
      for (const json::value& w : rule.at("limits").as_array()) {
        if (!row[2].empty()) row[2] += ", ";
        row[2] += Text(w.at("limit")) + "/" + Text(w.at("window")) + " " + Text(w.at("algorithm"));
      }
      row[3] = Text(rule.at("action"));
    }
    rows.push_back(std::move(row));
  }
  PrintTable(rows, out);
}

// An override's key as "user=alice header:x-api-key=k1".
std::string OverrideKey(const json::object& o) {
  std::string key;
  for (const auto& [name, value] : o.at("key").as_object()) {
    if (!key.empty()) key += " ";
    key += std::string(name) + "=" + Text(value);
  }
  return key;
}

// An override's limits as "1000/1m, 10/1s burst 20".
std::string OverrideLimits(const json::object& o) {
  std::string limits;
  for (const json::value& v : o.at("limits").as_array()) {
    const json::object& l = v.as_object();
    if (!limits.empty()) limits += ", ";
    limits += Text(l.at("limit")) + "/" + Text(l.at("window"));
    if (l.contains("burst")) limits += " burst " + Text(l.at("burst"));
  }
  return limits;
}

// A window's algorithm state for people: a bucket's level in tokens (or
// queued requests) with two decimals, else its counts as name=value.
std::string StateText(const json::object& state) {
  for (const std::string_view per : {"units_per_token", "units_per_request"}) {
    if (!state.contains(per)) continue;
    const double level = static_cast<double>(state.at("level").as_int64()) /
                         static_cast<double>(state.at(per).as_int64());
    char text[32];
    std::snprintf(text, sizeof(text), "%.2f", level);
    return std::string(per == "units_per_token" ? "tokens=" : "queued=") + text;
  }
  std::string out;
  for (const auto& [name, value] : state) {
    if (!out.empty()) out += " ";
    out += std::string(name) + "=" + Text(value);
  }
  return out;
}

void PrintKey(const json::object& doc, std::ostream& out) {
  out << "rule " << Text(doc.at("rule")) << ", key " << Text(doc.at("key")) << " ("
      << Text(doc.at("store")) << " store): "
      << (doc.at("limited").as_bool() ? "limited" : "not limited") << "\n";
  std::vector<std::vector<std::string>> rows = {
      {"WINDOW", "ALGORITHM", "LIMIT", "REMAINING", "RESET_MS", "RETRY_AFTER_MS", "STATE"}};
  for (const json::value& v : doc.at("windows").as_array()) {
    const json::object& w = v.as_object();
    rows.push_back({Text(w.at("window")), Text(w.at("algorithm")), Text(w.at("limit")),
                    Text(w.at("remaining")), Text(w.at("reset_ms")), Text(w.at("retry_after_ms")),
                    w.contains("state") ? StateText(w.at("state").as_object()) : ""});
  }
  PrintTable(rows, out);
  if (doc.contains("reserved_in_flight")) {
    out << "reserved for responses in flight (this gateway): "
        << Text(doc.at("reserved_in_flight")) << " units\n";
  }
  if (doc.contains("override")) {
    const json::object& o = doc.at("override").as_object();
    out << "override: " << OverrideLimits(o) << " for " << Seconds(o.at("ttl_ms")) << " s\n";
  }
  if (doc.contains("block")) {
    const json::object& b = doc.at("block").as_object();
    out << "blocked: " << Text(b.at("id")) << " (status " << Text(b.at("status")) << ") for "
        << Seconds(b.at("ttl_ms")) << " s\n";
  }
}

void PrintBlocks(const json::object& doc, std::ostream& out) {
  std::vector<std::vector<std::string>> rows = {{"ID", "STATUS", "TTL_S"}};
  for (const json::value& v : doc.at("blocks").as_array()) {
    const json::object& b = v.as_object();
    rows.push_back({Text(b.at("id")), Text(b.at("status")), Seconds(b.at("ttl_ms"))});
  }
  PrintTable(rows, out);
}

void PrintOverrides(const json::object& doc, std::ostream& out) {
  std::vector<std::vector<std::string>> rows = {{"RULE", "KEY", "LIMITS", "TTL_S", "APPLIES"}};
  for (const json::value& v : doc.at("overrides").as_array()) {
    const json::object& o = v.as_object();
    rows.push_back({Text(o.at("rule")), OverrideKey(o), OverrideLimits(o), Seconds(o.at("ttl_ms")),
                    o.at("applies").as_bool() ? "yes" : "no"});
  }
  PrintTable(rows, out);
}

}  // namespace

void PrintAnswer(const std::string& command, const json::object& doc, std::ostream& out) {
  if (command == "rules") {
    PrintRules(doc, out);
  } else if (command == "keys") {
    PrintKey(doc, out);
  } else if (command == "reset") {
    out << "reset rule " << Text(doc.at("rule")) << " key " << Text(doc.at("key")) << "\n";
  } else if (command == "block") {
    const json::object& b = doc.at("block").as_object();
    out << "blocked " << Text(b.at("id")) << " for " << Seconds(b.at("ttl_ms")) << " s (status "
        << Text(b.at("status")) << ")\n";
  } else if (command == "unblock") {
    out << "unblocked " << Text(doc.at("removed")) << "\n";
  } else if (command == "override set") {
    const json::object& o = doc.at("override").as_object();
    out << "override of rule " << Text(o.at("rule")) << " key " << OverrideKey(o) << ": "
        << OverrideLimits(o) << " for " << Seconds(o.at("ttl_ms")) << " s\n";
  } else if (command == "override list") {
    PrintOverrides(doc, out);
  } else if (command == "override remove") {
    const json::object& o = doc.at("removed").as_object();
    out << "removed the override of rule " << Text(o.at("rule")) << " key " << OverrideKey(o)
        << "\n";
  } else {
    PrintBlocks(doc, out);
  }
}

}  // namespace tollgate::gateway::ctl
