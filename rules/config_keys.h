// The table of configuration keys: for each table of the TOML file, the
// keys it may hold, their type, whether they are required, their range or
// allowed values, and a line that says what they are. The strict reader
// (TableReader) accepts only the keys listed here and takes types, ranges
// and choices from here; the JSON Schema (rules/config_schema.h) and the
// documentation check (tests/docs/config_keys_test.py) are made from it.
// Constant data; safe to read from any thread.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace tollgate::rules {

enum class KeyType : std::uint8_t {
  kString,
  kBool,
  kInteger,          // min..max
  kDuration,         // a string such as "1m30s"; at least min milliseconds
  kAddress,          // "host:port" or "[v6]:port"
  kHeaderName,       // an HTTP field name, or "" for none
  kChoice,           // one of `choices`
  kIntegerOrChoice,  // an integer min..max, or one of `choices`
  kStrings,          // an array of strings
  kStringOrStrings,  // a string or an array of strings
  kTable,            // a table of `table`'s keys
  kTables,           // an array of such tables ([[name]])
  kTableOrTables,    // one such table or an array of them
  kStringTable,      // a table of strings whose names are HTTP field names
  kIntegerTable,     // a table of integers min..max under any names
  kDescriptorTable,  // RLS descriptor entries: name = "value" | "*" | { not = [...] }
  kSource,  // one of `choices`, a table of `table`'s keys, or (max > 0) an integer min..max
  kNumber,  // an integer or a float, at least min
  kNever,   // named only to be refused with a message of its own
};

// kConditional: required unless another key makes it meaningless (the
// description says which); the reader checks it, the schema does not.
enum class Presence : std::uint8_t { kOptional, kRequired, kConditional };

struct TableSpec;

struct KeySpec {
  std::string_view name = {};
  KeyType type = KeyType::kString;
  Presence presence = Presence::kOptional;
  std::int64_t min = 0;  // kInteger, kIntegerOrChoice, kSource, kNumber; kDuration: ms
  std::int64_t max = 0;  // kInteger, kIntegerOrChoice, kSource
  std::span<const std::string_view> choices = {};  // kChoice, kIntegerOrChoice, kSource
  const TableSpec* table = nullptr;                // kTable, kTables, kTableOrTables, kSource
  // A regular expression the string (or each string) matches, for the
  // schema only: the reader's own check of these values is its code's.
  std::string_view pattern = {};
  std::string_view description = {};
};

struct TableSpec {
  std::string_view name;  // unique: the schema's definition name
  std::span<const KeySpec> keys;

  // The key named `key`, or nullptr.
  const KeySpec* Find(std::string_view key) const;
};

// The top level of the file; every other table is reached from its keys.
const TableSpec& RootTable();

}  // namespace tollgate::rules
