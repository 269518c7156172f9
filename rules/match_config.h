// The reader of a rule's `match` table: the request's conditions, those of
// its `not`, and the Envoy RLS domain and descriptor. Used by ReadRule;
// reports into the ErrorList.
#pragma once

#include "rules/config_reader.h"
#include "rules/rule.h"

namespace tollgate::rules {

// `match`, or the `not` table inside it (same conditions, no further `not`).
enum class MatchTable { kMatch, kNot };

// Reads `v` (a table of `spec`'s keys) into `out`.
void ReadMatch(const toml::value& v, const TableSpec& spec, MatchTable which, RuleMatch& out,
               ErrorList& errors);

}  // namespace tollgate::rules
