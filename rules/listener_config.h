// Readers of the listening sections of the configuration: [[listeners]]
// (with their TLS) and [decision]. Used by LoadConfig*(); report into the
// ErrorList.
#pragma once

#include <optional>
#include <vector>

#include "rules/config.h"
#include "rules/config_reader.h"

namespace tollgate::rules {

void ReadListener(TableReader r, std::vector<ListenerConfig>& out);
void ReadDecision(TableReader r, std::optional<DecisionConfig>& out);

// Every listening address of the file (the listeners', the decision
// service's and the admin API's) is bound by one socket group only: the
// second naming of an address is an error at its position. Port 0 is a new
// port at every bind. The same address written otherwise (0.0.0.0 beside
// 127.0.0.1) is refused when the listeners are bound.
void CheckDistinctAddresses(const toml::value& root, ErrorList& errors);

}  // namespace tollgate::rules
