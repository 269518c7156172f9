#include "prometheus_server.h"

#include <fmt/format.h>

#include <boost/json/parse.hpp>

#include "net.h"
#include "tests/gateway/test_support.h"

namespace tollgate::testing {

PrometheusServer::PrometheusServer(std::uint16_t target_port, std::vector<std::string> rule_files)
    : dir_(std::make_unique<TempDir>()) {
  std::string rules;
  for (const std::string& file : rule_files) rules += "  - " + file + "\n";
  const std::string config =
      dir_->Write("prometheus.yml", fmt::format(R"(global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
{}scrape_configs:
  - job_name: tollgate
    static_configs:
      - targets: ["127.0.0.1:{}"]
)",
                                                rules.empty() ? "  []\n" : rules, target_port));
  port_ = UnusedPort();
  // Warnings only: nothing reads its standard error while it runs.
  process_ = std::make_unique<Process>(
      std::vector<std::string>{"/usr/bin/prometheus", "--config.file=" + config, "--log.level=warn",
                               "--storage.tsdb.path=" + dir_->path() + "/data",
                               "--web.listen-address=127.0.0.1:" + std::to_string(port_)});
}

PrometheusServer::~PrometheusServer() = default;

boost::json::value PrometheusServer::Api(const std::string& target, std::string* error) const {
  try {
    Client api(port_, 2000);
    const Response r = api.Get(target);
    boost::json::value json = boost::json::parse(r.body());
    if (r.result_int() != 200 || json.at("status") != "success") {
      if (error != nullptr) *error = r.body();
      return nullptr;
    }
    return json.at("data");
  } catch (const std::exception& e) {
    // Not listening yet, or not answering JSON yet.
    if (error != nullptr) *error = e.what();
    return nullptr;
  }
}

boost::json::value PrometheusServer::Query(const std::string& promql, std::string* error) const {
  boost::json::value data = Api("/api/v1/query?query=" + UrlEncode(promql), error);
  return data.is_null() ? data : data.at("result");
}

std::string UrlEncode(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

}  // namespace tollgate::testing
