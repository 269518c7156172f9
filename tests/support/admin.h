// The admin API in tests: the token the tests configure, its header line,
// and one request over a fresh connection (through test_support.h's
// Client).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tests/gateway/test_support.h"

namespace tollgate::testing {

inline constexpr std::string_view kAdminToken = "0123456789abcdef0123456789abcdef-admin";

// "Authorization: Bearer <token>\r\n".
std::string Bearer(std::string_view token = kAdminToken);

// `config` (a whole configuration with an [admin] table) with
// `token_file = "<token_file>"` as the table's first key.
std::string WithAdminTokenFile(std::string config, const std::string& token_file);

// `method` `target` to the admin API on `port`, with the header lines
// `headers` (e.g. Bearer()) and `body` (its Content-Length always sent);
// the answer to HEAD is read without a body.
Response AdminRequest(std::uint16_t port, const std::string& method, const std::string& target,
                      const std::string& headers = "", const std::string& body = "");

}  // namespace tollgate::testing
