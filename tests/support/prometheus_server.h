// A throwaway Prometheus server (Debian's /usr/bin/prometheus) for tests:
// it scrapes one target on loopback every second, optionally evaluates
// rule files every second, serves its HTTP API on a free loopback port and
// is killed at destruction. Not thread-safe.
#pragma once

#include <boost/json/value.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tollgate::testing {

class Process;
class TempDir;

class PrometheusServer {
 public:
  // Scrapes http://127.0.0.1:`target_port`/metrics as job "tollgate".
  explicit PrometheusServer(std::uint16_t target_port, std::vector<std::string> rule_files = {});
  ~PrometheusServer();
  PrometheusServer(const PrometheusServer&) = delete;
  PrometheusServer& operator=(const PrometheusServer&) = delete;

  std::uint16_t port() const { return port_; }
  // GET `target` on the API (e.g. "/api/v1/rules"): the `data` member of a
  // successful answer; null while Prometheus is starting or when it
  // answers an error (then in `error`, if given).
  boost::json::value Api(const std::string& target, std::string* error = nullptr) const;
  // The `result` of the instant query `promql` (its vector or matrix,
  // possibly empty); null as Api() is.
  boost::json::value Query(const std::string& promql, std::string* error = nullptr) const;

 private:
  std::unique_ptr<TempDir> dir_;
  std::uint16_t port_ = 0;
  std::unique_ptr<Process> process_;
};

// `text` percent-encoded for a URL's query component.
std::string UrlEncode(const std::string& text);

}  // namespace tollgate::testing
