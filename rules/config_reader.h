// Strict reading of toml11 values: every key must be known, every value of
// the right type and range; problems are collected (not thrown) as
// `file:line:col: message` so that all of them can be reported at once.
// Used only while loading configuration.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <toml.hpp>
#include <utility>
#include <vector>

#include "rules/config_keys.h"
#include "rules/duration.h"

namespace tollgate::rules {

struct ConfigError {
  std::string file;
  std::uint32_t line = 0;
  std::uint32_t column = 0;
  std::string message;
  std::string ToString() const;  // "file:line:col: message"; line 0: the message
};

class ErrorList {
 public:
  void Add(const toml::value& at, std::string message);
  void Add(ConfigError error) { errors_.push_back(std::move(error)); }
  bool empty() const { return errors_.empty(); }
  const std::vector<ConfigError>& errors() const { return errors_; }

 private:
  std::vector<ConfigError> errors_;
};

// Reads the keys of one table, as `spec` (rules/config_keys.h) lists them:
// the typed readers take the range or choices from there. Finish() reports
// the keys nobody asked for: those not in `spec`, and those `spec` has but
// that mean nothing where they stand (the reader did not read them). Asking
// for a key `spec` does not have, or as another type, is a mistake of the
// reader: it is reported as an internal error, so that any test reading
// that table sees it.
class TableReader {
 public:
  TableReader(const toml::value& table, const TableSpec& spec, ErrorList& errors);

  bool Has(std::string_view key) const;
  // The raw value (marked as known), or nullptr when absent.
  const toml::value* Find(std::string_view key);
  // The value of a required key; reports it missing otherwise.
  const toml::value* Require(std::string_view key);
  // The table of keys of `key`'s value (a table, or an array of tables).
  const TableSpec& TableOf(std::string_view key);

  std::optional<std::string> String(std::string_view key);
  std::optional<std::int64_t> Integer(std::string_view key);
  std::optional<bool> Bool(std::string_view key);
  std::optional<std::int64_t> DurationMs(std::string_view key);
  std::optional<HostPort> Address(std::string_view key);
  // A string that is an HTTP field name (IsHeaderName), or empty (none).
  std::optional<std::string> HeaderName(std::string_view key);
  std::optional<std::vector<std::string>> Strings(std::string_view key);
  std::optional<std::string> OneOf(std::string_view key);
  // A number, integer or not, at least the key's min.
  std::optional<double> Number(std::string_view key);
  // A kSource key's value: its choice, its table (read it with TableOf's
  // keys), or its integer; nullopt when absent or wrong (reported).
  struct Source {
    std::optional<std::string> choice;
    const toml::value* table = nullptr;
    std::optional<std::int64_t> integer;
  };
  std::optional<Source> SourceOf(std::string_view key);
  // A kIntegerOrChoice key: its integer (`choice` empty) or its choice.
  struct IntegerOrChoice {
    std::int64_t number = 0;
    std::string choice;
  };
  std::optional<IntegerOrChoice> IntegerOrOneOf(std::string_view key);
  // A kIntegerTable key: its (name, integer) entries, in no set order.
  std::optional<std::vector<std::pair<std::string, std::int64_t>>> IntegerTable(
      std::string_view key);

  void Finish();

  const toml::value& table() const { return table_; }
  ErrorList& errors() { return errors_; }

 private:
  // `key`'s entry in spec_, checked to be of one of `types`; nullptr (and
  // an internal error) otherwise.
  const KeySpec* Spec(std::string_view key, std::initializer_list<KeyType> types);
  const toml::value* FindAs(std::string_view key, std::initializer_list<KeyType> types);
  // `v`, the integer value of `key`, within its spec's range; reported otherwise.
  std::optional<std::int64_t> InRange(const toml::value& v, std::string_view key);

  const toml::value& table_;
  const TableSpec& spec_;
  ErrorList& errors_;
  std::set<std::string, std::less<>> used_;
};

// A value's type as a user reads it: "a string", "an integer", ...
std::string_view DescribeType(const toml::value& value);

// Reads one value (not a table key): helpers shared with TableReader.
std::optional<std::string> ReadString(const toml::value& v, std::string_view name,
                                      ErrorList& errors);
// Reports `text` (read from `at`, as `what`) unless it is an HTTP field name.
bool CheckHeaderName(const toml::value& at, std::string_view what, std::string_view text,
                     ErrorList& errors);
// A string or an array of strings.
std::optional<std::vector<std::string>> ReadStringOrStrings(const toml::value& v,
                                                            std::string_view name,
                                                            ErrorList& errors);
// Reports `file` (read from `at`, named as `what`) unless it can be opened.
void CheckReadable(const toml::value& at, const std::string& file, std::string_view what,
                   ErrorList& errors);
std::optional<std::int64_t> ReadDurationMs(const toml::value& v, std::string_view name,
                                           ErrorList& errors, std::int64_t min_ms = 0);

// A route's or rule's path_prefix and host are kept in the canonical form
// requests are matched in (rules/normalize.h); these say why one has none.
inline constexpr char kNotCanonicalPath[] =
    "\"path_prefix\" \"{}\" is not a valid path (a malformed escape, %00 or dot segments above "
    "the root)";
inline constexpr char kNotAHost[] = "\"host\" \"{}\" is not a valid host (an empty name or \"..\")";

}  // namespace tollgate::rules
