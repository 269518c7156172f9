#include "admin.h"

namespace tollgate::testing {

std::string Bearer(std::string_view token) {
  return "Authorization: Bearer " + std::string(token) + "\r\n";
}

std::string WithAdminTokenFile(std::string config, const std::string& token_file) {
  config.replace(config.find("[admin]\n"), 8, "[admin]\ntoken_file = \"" + token_file + "\"\n");
  return config;
}

Response AdminRequest(std::uint16_t port, const std::string& method, const std::string& target,
                      const std::string& headers, const std::string& body) {
  Client client(port);
  client.Send(method + " " + target + " HTTP/1.1\r\nHost: admin\r\n" + headers +
              "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  return client.Read(method == "HEAD");
}

}  // namespace tollgate::testing
