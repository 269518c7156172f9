// Readers of who a client is: [identity] (with its jwt and client_cert
// tables), and the secrets and CIDR lists other sections share. Used by
// LoadConfig*(); report into the ErrorList.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rules/config_reader.h"
#include "rules/rule.h"

namespace tollgate::rules {

// A secret named by `env_key` (an environment variable) or `file_key` (a
// file, trailing newlines dropped), whichever is present (the file when
// both are); nullopt when neither is, or on an error (reported).
std::optional<std::string> ReadSecret(TableReader& r, std::string_view env_key,
                                      std::string_view file_key);

// A CIDR or a list of CIDRs ("10.0.0.0/8", "::1/128", a bare address);
// `name` is the key, for the errors.
std::vector<Cidr> ReadCidrs(const toml::value& v, std::string_view name, ErrorList& errors);

void ReadIdentity(TableReader r, IdentityConfig& out);

}  // namespace tollgate::rules
