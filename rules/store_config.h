// The reader of [store] (with its redis table). Used by LoadConfig*();
// reports into the ErrorList.
#pragma once

#include "rules/config_reader.h"
#include "rules/rule.h"

namespace tollgate::rules {

void ReadStore(TableReader r, StoreConfig& out);

}  // namespace tollgate::rules
