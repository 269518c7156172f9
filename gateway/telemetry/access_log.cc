#include "gateway/telemetry/access_log.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/async.h>
#include <spdlog/details/periodic_worker.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <chrono>
#include <ctime>

#include "gateway/telemetry/utf8.h"

namespace tollgate::gateway {
namespace {

constexpr std::size_t kQueueSize = 8192;

// "21/Nov/2026:23:14:10 +0000" for the current second, formatted once per
// second per thread.
std::string_view CommonLogTime() {
  thread_local std::time_t cached_second = 0;
  thread_local std::string cached;
  const std::time_t now = std::time(nullptr);
  if (now != cached_second) {
    std::tm tm{};
    gmtime_r(&now, &tm);
    cached = fmt::format("{:%d/%b/%Y:%H:%M:%S} +0000", tm);
    cached_second = now;
  }
  return cached;
}

std::string_view OrDash(std::string_view s) { return s.empty() ? "-" : s; }

// " cost=<reserved>/<settled>" ("-" for a cost the response did not say),
// or nothing without a reservation.
std::string CostField(const AccessRecord& r) {
  if (r.cost_reserved < 0) return {};
  if (r.cost_settled < 0) return fmt::format(" cost={}/-", r.cost_reserved);
  return fmt::format(" cost={}/{}", r.cost_reserved, r.cost_settled);
}

std::string FormatCombined(const AccessRecord& r) {
  std::string upstream_s = r.upstream_s < 0 ? "-" : fmt::format("{:.3f}", r.upstream_s);
  return fmt::format(
      "{} - - [{}] \"{} {} HTTP/{}.{}\" {} {} \"{}\" \"{}\" rt={:.3f} urt={} route={} "
      "upstream={} in={} rl={} request_id={}{}{}{}{}{}{}",
      r.client, CommonLogTime(), EscapeLogText(r.method), EscapeLogText(r.target), r.version / 10,
      r.version % 10, r.status, r.bytes_out, EscapeLogText(OrDash(r.referer)),
      EscapeLogText(OrDash(r.user_agent)), r.duration_s, upstream_s, OrDash(r.route),
      OrDash(r.upstream), r.bytes_in, OrDash(r.ratelimit), OrDash(r.request_id),
      r.limit_key.empty() ? "" : " key=", r.limit_key,
      r.retry_after_ms < 0 ? "" : fmt::format(" retry_after_ms={}", r.retry_after_ms),
      CostField(r), r.error.empty() ? "" : " error=", r.error);
}

// "2026-12-02T01:02:03.456Z" (RFC 3339, UTC, milliseconds) for now.
std::string Rfc3339Now() {
  const std::int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  const std::time_t second = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&second, &tm);
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03}Z", tm, ms % 1000);
}

// One JSON object; the seconds as plain decimals with millisecond places
// ("2.403"), which Boost.JSON would write as "2.403E0".
std::string FormatJson(const AccessRecord& r) {
  boost::json::object o;
  o["time"] = Rfc3339Now();
  o["client"] = r.client;
  o["method"] = ValidUtf8(r.method);
  o["target"] = ValidUtf8(r.target);
  o["protocol"] = fmt::format("HTTP/{}.{}", r.version / 10, r.version % 10);
  o["status"] = r.status;
  o["bytes_in"] = r.bytes_in;
  o["bytes_out"] = r.bytes_out;
  if (!r.route.empty()) o["route"] = r.route;
  if (!r.upstream.empty()) o["upstream"] = r.upstream;
  if (!r.user_agent.empty()) o["user_agent"] = ValidUtf8(r.user_agent);
  if (!r.referer.empty()) o["referer"] = ValidUtf8(r.referer);
  if (!r.error.empty()) o["error"] = r.error;
  if (!r.ratelimit.empty()) o["ratelimit"] = ValidUtf8(r.ratelimit);
  if (!r.limit_key.empty()) o["limit_key"] = ValidUtf8(r.limit_key);
  if (r.retry_after_ms >= 0) o["retry_after_ms"] = r.retry_after_ms;
  if (!r.request_id.empty()) o["request_id"] = r.request_id;
  if (r.cost_reserved >= 0) o["cost_reserved"] = r.cost_reserved;
  if (r.cost_settled >= 0) o["cost_settled"] = r.cost_settled;
  std::string line = boost::json::serialize(o);
  line.pop_back();  // the closing brace
  line += fmt::format(",\"duration_s\":{:.3f}", r.duration_s);
  if (r.upstream_s >= 0) line += fmt::format(",\"upstream_s\":{:.3f}", r.upstream_s);
  line += '}';
  return line;
}

}  // namespace

std::unique_ptr<AccessLog> AccessLog::Create(const rules::LogConfig& config, std::string& error) {
  auto log = std::unique_ptr<AccessLog>(new AccessLog());
  log->format_ = config.format;
  if (config.access == "off") return log;
  static std::atomic<int> counter{0};
  const std::string name = "access" + std::to_string(counter.fetch_add(1));
  log->pool_ = std::make_shared<spdlog::details::thread_pool>(kQueueSize, 1);
  try {
    std::shared_ptr<spdlog::sinks::sink> sink;
    if (config.access == "stdout") {
      sink = std::make_shared<spdlog::sinks::stdout_sink_mt>();
    } else {
      sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(config.access);
    }
    sink->set_pattern("%v");
    // Block rather than drop: an access log that loses lines cannot be trusted.
    log->logger_ = std::make_shared<spdlog::async_logger>(name, sink, log->pool_,
                                                          spdlog::async_overflow_policy::block);
    log->logger_->set_level(spdlog::level::info);
    log->logger_->flush_on(spdlog::level::err);
    log->flusher_ = std::make_unique<spdlog::details::periodic_worker>(
        [logger = log->logger_] { logger->flush(); }, std::chrono::seconds(1));
  } catch (const spdlog::spdlog_ex& e) {
    error = fmt::format("cannot open access log \"{}\": {}", config.access, e.what());
    return nullptr;
  }
  return log;
}

AccessLog::~AccessLog() {
  if (!logger_) return;
  flusher_.reset();
  logger_->flush();
  pool_.reset();  // joins the writer after the queue is drained
  logger_.reset();
}

void AccessLog::Flush() {
  if (logger_) logger_->flush();
}

void AccessLog::Write(const AccessRecord& record) {
  if (!logger_) return;
  logger_->info(format_ == rules::LogFormat::kJson ? FormatJson(record) : FormatCombined(record));
}

}  // namespace tollgate::gateway
