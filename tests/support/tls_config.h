// Gateway configurations with a TLS listener, for tests.
#pragma once

#include <string>

namespace tollgate::testing {

// A listener's "tls" table: `cert`, `key` and `extra` (client_ca = ...,
// client_cert = ..., ...).
std::string TlsTable(const std::string& cert, const std::string& key,
                     const std::string& extra = "");

// BasicConfig(`more`) with `tls` (a TlsTable) on its listener and `threads`
// threads.
std::string TlsConfig(const std::string& tls, const std::string& more = "", int threads = 1);

}  // namespace tollgate::testing
