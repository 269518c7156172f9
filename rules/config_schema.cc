#include "rules/config_schema.h"

#include <boost/json.hpp>

#include "rules/config_keys.h"

namespace tollgate::rules {
namespace {

namespace json = boost::json;

// Patterns of the string kinds the reader parses itself (rules/duration.h).
constexpr std::string_view kDurationPattern =
    "^(0|(([0-9]+\\.?[0-9]*|\\.[0-9]+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h|d))+)$";
constexpr std::string_view kAddressPattern = "^(\\[[0-9A-Fa-f:.]+\\]|[^\\[\\]:]*):[0-9]{1,5}$";
constexpr std::string_view kHeaderNamePattern = "^[-!#$%&'*+.^_`|~0-9A-Za-z]*$";

json::object StringSchema(std::string_view pattern) {
  json::object s{{"type", "string"}};
  if (!pattern.empty()) s["pattern"] = pattern;
  return s;
}

json::object ArrayOf(json::value items) { return {{"type", "array"}, {"items", std::move(items)}}; }

json::object Ref(const TableSpec& table) {
  return {{"$ref", "#/definitions/" + std::string(table.name)}};
}

json::object StringOrStringsSchema(std::string_view pattern) {
  return {{"anyOf", json::array{StringSchema(pattern), ArrayOf(StringSchema(pattern))}}};
}

json::object TableSchema(const TableSpec& table, json::object& definitions);

// The schema of one key's value; the tables it names go to `definitions`.
json::value KeySchema(const KeySpec& key, json::object& definitions) {
  json::object s;
  switch (key.type) {
    case KeyType::kString:
      s = StringSchema(key.pattern);
      break;
    case KeyType::kBool:
      s = {{"type", "boolean"}};
      break;
    case KeyType::kInteger:
      s = {{"type", "integer"}, {"minimum", key.min}, {"maximum", key.max}};
      break;
    case KeyType::kDuration:
      s = StringSchema(kDurationPattern);
      break;
    case KeyType::kAddress:
      s = StringSchema(kAddressPattern);
      break;
    case KeyType::kHeaderName:
      s = StringSchema(kHeaderNamePattern);
      break;
    case KeyType::kChoice: {
      json::array choices;
      for (std::string_view c : key.choices) choices.emplace_back(c);
      s = {{"type", "string"}, {"enum", std::move(choices)}};
      break;
    }
    case KeyType::kIntegerOrChoice: {
      json::array choices;
      for (std::string_view c : key.choices) choices.emplace_back(c);
      json::object number{{"type", "integer"}, {"minimum", key.min}, {"maximum", key.max}};
      json::object choice{{"type", "string"}, {"enum", std::move(choices)}};
      s = {{"anyOf", json::array{std::move(number), std::move(choice)}}};
      break;
    }
    case KeyType::kStrings:
      s = ArrayOf(StringSchema(key.pattern));
      break;
    case KeyType::kStringOrStrings:
      s = StringOrStringsSchema(key.pattern);
      break;
    case KeyType::kTable:
    case KeyType::kTables:
    case KeyType::kTableOrTables: {
      if (!definitions.contains(key.table->name)) {
        definitions[key.table->name] = nullptr;  // taken: a table refers to itself at most once
        definitions[key.table->name] = TableSchema(*key.table, definitions);
      }
      json::object ref = Ref(*key.table);
      if (key.type == KeyType::kTable) {
        s = {{"allOf", json::array{ref}}};
      } else if (key.type == KeyType::kTables) {
        s = ArrayOf(ref);
      } else {
        s = {{"anyOf", json::array{ref, ArrayOf(ref)}}};
      }
      break;
    }
    case KeyType::kStringTable:
      s = {{"type", "object"},
           {"propertyNames", StringSchema(kHeaderNamePattern)},
           {"additionalProperties", StringSchema({})}};
      break;
    case KeyType::kIntegerTable:
      s = {{"type", "object"},
           {"additionalProperties",
            json::object{{"type", "integer"}, {"minimum", key.min}, {"maximum", key.max}}}};
      break;
    case KeyType::kDescriptorTable: {
      json::object except{{"type", "object"},
                          {"properties", {{"not", ArrayOf(StringSchema({}))}}},
                          {"required", json::array{"not"}},
                          {"additionalProperties", false}};
      except["properties"].as_object()["not"].as_object()["minItems"] = 1;
      s = {{"type", "object"},
           {"minProperties", 1},
           {"additionalProperties", {{"anyOf", json::array{StringSchema({}), except}}}}};
      break;
    }
    case KeyType::kSource: {
      json::array choices;
      for (std::string_view c : key.choices) choices.emplace_back(c);
      json::array any{json::object{{"type", "string"}, {"enum", std::move(choices)}},
                      json::object{{"allOf", json::array{Ref(*key.table)}}}};
      if (key.max > 0) {
        any.emplace_back(
            json::object{{"type", "integer"}, {"minimum", key.min}, {"maximum", key.max}});
      }
      if (!definitions.contains(key.table->name)) {
        definitions[key.table->name] = nullptr;
        definitions[key.table->name] = TableSchema(*key.table, definitions);
      }
      s = {{"anyOf", std::move(any)}};
      break;
    }
    case KeyType::kNumber:
      s = {{"type", "number"}, {"minimum", key.min}};
      break;
    case KeyType::kNever:
      return false;
  }
  json::object out{{"description", key.description}};
  for (auto& [name, value] : s) out[name] = std::move(value);
  return out;
}

json::object TableSchema(const TableSpec& table, json::object& definitions) {
  json::object properties;
  json::array required;
  for (const KeySpec& key : table.keys) {
    properties[key.name] = KeySchema(key, definitions);
    if (key.presence == Presence::kRequired) required.emplace_back(key.name);
  }
  json::object s{
      {"type", "object"}, {"properties", std::move(properties)}, {"additionalProperties", false}};
  if (!required.empty()) s["required"] = std::move(required);
  return s;
}

// JSON with two spaces of indentation per level, as editors show it.
void Write(const json::value& v, int depth, std::string& out) {
  const std::string indent(2 * (depth + 1), ' ');
  const std::string close(2 * depth, ' ');
  if (v.is_object() && !v.as_object().empty()) {
    out += "{\n";
    bool first = true;
    for (const auto& [name, value] : v.as_object()) {
      if (!first) out += ",\n";
      first = false;
      out += indent + json::serialize(json::string(name)) + ": ";
      Write(value, depth + 1, out);
    }
    out += "\n" + close + "}";
  } else if (v.is_array() && !v.as_array().empty()) {
    out += "[\n";
    bool first = true;
    for (const json::value& item : v.as_array()) {
      if (!first) out += ",\n";
      first = false;
      out += indent;
      Write(item, depth + 1, out);
    }
    out += "\n" + close + "]";
  } else {
    out += json::serialize(v);
  }
}

}  // namespace

std::string ConfigSchemaJson() {
  const TableSpec& root = RootTable();
  json::object definitions;
  json::object top = TableSchema(root, definitions);
  json::object schema{{"$schema", "http://json-schema.org/draft-07/schema#"},
                      {"title", "tollgate configuration"}};
  for (auto& [name, value] : top) schema[name] = std::move(value);
  schema["definitions"] = std::move(definitions);
  std::string out;
  Write(schema, 0, out);
  out += "\n";
  return out;
}

}  // namespace tollgate::rules
