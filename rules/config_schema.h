// The configuration's JSON Schema (draft-07), made from the table of keys
// (rules/config_keys.h): what `tollgate schema` prints and
// tollgate.schema.json holds, for editors that check TOML with a schema.
// It checks names, types, ranges and choices; what depends on several keys
// (learn_bucket needs learn_limits, ...) only the reader checks.
#pragma once

#include <string>

namespace tollgate::rules {

// The schema as indented JSON, ending in a newline.
std::string ConfigSchemaJson();

}  // namespace tollgate::rules
