#include "tls_config.h"

#include "tests/gateway/test_support.h"

namespace tollgate::testing {

std::string TlsTable(const std::string& cert, const std::string& key, const std::string& extra) {
  return "tls = { cert = \"" + cert + "\", key = \"" + key + "\"" +
         (extra.empty() ? "" : ", " + extra) + " }";
}

std::string TlsConfig(const std::string& tls, const std::string& more, int threads) {
  std::string config = BasicConfig(more);
  config.replace(config.find("address = \"127.0.0.1:0\""), 23, "address = \"127.0.0.1:0\"\n" + tls);
  config.replace(config.find("threads = 1"), 11, "threads = " + std::to_string(threads));
  return config;
}

}  // namespace tollgate::testing
