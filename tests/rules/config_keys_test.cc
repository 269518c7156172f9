// The table of keys (rules/config_keys.h): its shape, that TableReader
// takes ranges and choices from it and refuses what it does not list, and
// the JSON Schema made from it.
#include "rules/config_keys.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "rules/config_reader.h"
#include "rules/config_schema.h"

namespace tollgate::rules {
namespace {

void CheckTable(const TableSpec& table, std::set<std::string>& seen) {
  if (!seen.insert(std::string(table.name)).second) return;
  std::set<std::string_view> names;
  for (const KeySpec& key : table.keys) {
    SCOPED_TRACE(std::string(table.name) + "." + std::string(key.name));
    EXPECT_TRUE(names.insert(key.name).second) << "listed twice";
    EXPECT_FALSE(key.description.empty());
    const bool nested = key.type == KeyType::kTable || key.type == KeyType::kTables ||
                        key.type == KeyType::kTableOrTables || key.type == KeyType::kSource;
    EXPECT_EQ(key.table != nullptr, nested);
    EXPECT_EQ(!key.choices.empty(), key.type == KeyType::kChoice ||
                                         key.type == KeyType::kIntegerOrChoice ||
                                         key.type == KeyType::kSource);
    if (key.type == KeyType::kInteger || key.type == KeyType::kIntegerOrChoice) {
      EXPECT_LE(key.min, key.max);
    }
    if (key.table != nullptr) CheckTable(*key.table, seen);
  }
}

TEST(ConfigKeys, EveryTableIsWellFormed) {
  std::set<std::string> seen;
  CheckTable(RootTable(), seen);
  EXPECT_GT(seen.size(), 15u);
}

constexpr std::string_view kColours[] = {"red", "green"};
constexpr KeySpec kKeys[] = {
    {.name = "n", .type = KeyType::kInteger, .min = 2, .max = 5, .description = "n"},
    {.name = "colour", .type = KeyType::kChoice, .choices = kColours, .description = "c"},
    {.name = "unread", .type = KeyType::kBool, .description = "u"},
};
constexpr TableSpec kTable{"test", kKeys};

std::vector<std::string> Read(const std::string& text, void (*read)(TableReader&)) {
  std::istringstream in(text);
  const toml::value table = toml::parse(in, "t.toml");
  ErrorList errors;
  TableReader r(table, kTable, errors);
  read(r);
  r.Finish();
  std::vector<std::string> out;
  for (const ConfigError& e : errors.errors()) out.push_back(e.ToString());
  return out;
}

TEST(ConfigKeys, TheReaderTakesRangesAndChoicesFromTheTable) {
  const auto read = [](TableReader& r) {
    r.Integer("n");
    r.OneOf("colour");
  };
  EXPECT_EQ(
      Read("n = 6\ncolour = \"blue\"\n", read),
      (std::vector<std::string>{R"(t.toml:1:5: "n" must be between 2 and 5; got 6)",
                                R"(t.toml:2:10: "colour" must be one of red, green; got "blue")"}));
  EXPECT_TRUE(Read("n = 5\ncolour = \"red\"\n", read).empty());
}

TEST(ConfigKeys, KeysNotReadOrNotListedAreUnknown) {
  const auto read = [](TableReader& r) { r.Integer("n"); };
  std::vector<std::string> errors = Read("n = 3\nunread = true\nother = 1\n", read);
  std::sort(errors.begin(), errors.end());  // in the table's order, which is a hash's
  EXPECT_EQ(errors, (std::vector<std::string>{R"(t.toml:2:10: unknown key "unread")",
                                              R"(t.toml:3:9: unknown key "other")"}));
}

TEST(ConfigKeys, ReadingWhatTheTableDoesNotListIsAnInternalError) {
  const auto unlisted = [](TableReader& r) { r.Integer("other"); };
  const std::vector<std::string> errors = Read("n = 3\n", unlisted);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_NE(errors[0].find("internal error: the reader reads \"other\""), std::string::npos);
  const auto mistyped = [](TableReader& r) { r.Bool("n"); };
  EXPECT_NE(Read("", mistyped).at(0).find("internal error: the reader reads \"n\" as another type"),
            std::string::npos);
}

TEST(ConfigKeys, TheSchemaRefusesUnknownKeysAndHasEveryTable) {
  const boost::json::value schema = boost::json::parse(ConfigSchemaJson());
  EXPECT_EQ(schema.at("$schema"), "http://json-schema.org/draft-07/schema#");
  EXPECT_EQ(schema.at("additionalProperties"), false);
  std::set<std::string> seen;
  CheckTable(RootTable(), seen);
  seen.erase(std::string(RootTable().name));
  for (const std::string& name : seen) {
    const boost::json::value& table = schema.at("definitions").at(name);
    EXPECT_EQ(table.at("additionalProperties"), false) << name;
  }
  EXPECT_EQ(schema.at("definitions").as_object().size(), seen.size());
  const boost::json::value& threads =
      schema.at("definitions").at("server").at("properties").at("threads");
  EXPECT_EQ(threads.at("minimum"), 0);
  EXPECT_EQ(threads.at("maximum"), 256);
}

}  // namespace
}  // namespace tollgate::rules
