#include "gateway/admin/admin_views.h"

#include <boost/json/array.hpp>

#include "rules/rule_set.h"

namespace tollgate::gateway {
namespace {

namespace json = boost::json;

std::string_view ActionName(rules::RuleAction action) {
  switch (action) {
    case rules::RuleAction::kReject:
      return "reject";
    case rules::RuleAction::kDelay:
      return "delay";
    case rules::RuleAction::kDryRun:
      return "dry_run";
  }
  return "";
}

}  // namespace

json::object DescribeRule(const rules::RuleConfig& rule) {
  json::object out;
  out["name"] = rule.name;
  if (rule.exempt) {
    out["exempt"] = true;
    return out;
  }
  json::array key;
  for (const rules::KeyPart& part : rule.key) key.emplace_back(rules::KeyPartName(part));
  out["key"] = std::move(key);
  if (rule.max_inflight > 0) {
    out["max_inflight"] = rule.max_inflight;
    return out;
  }
  json::array limits;
  for (std::size_t i = 0; i < rule.limit->windows.size(); ++i) {
    const algorithms::LimitParams& p = rule.limit->windows[i];
    json::object window;
    window["algorithm"] = algorithms::AlgorithmName(p.algorithm);
    window["limit"] = p.limit;
    window["window"] = rule.windows[i].text;
    if (const auto& calendar = rule.limit->calendar) {
      // Its periods' usual length: the algorithm's window is only a span.
      window["window_ms"] = rule.windows[i].seconds * 1000;
      window["timezone"] = calendar->zone_name();
    } else {
      window["window_ms"] = p.window_ms;
    }
    if (p.algorithm == algorithms::Algorithm::kTokenBucket ||
        p.algorithm == algorithms::Algorithm::kLeakyBucket) {
      window["burst"] = p.burst;
    }
    if (p.algorithm == algorithms::Algorithm::kSubWindow) window["sub_windows"] = p.sub_windows;
    limits.emplace_back(std::move(window));
  }
  out["limits"] = std::move(limits);
  out["cost"] = rule.cost;
  out["per"] = rule.per == rules::LimitUnit::kMessage ? "message" : "request";
  out["action"] = ActionName(rule.action);
  out["status"] = rule.status;
  return out;
}

json::object AlgorithmState(const algorithms::LimitParams& p, const algorithms::WindowView& v) {
  switch (p.algorithm) {
    case algorithms::Algorithm::kTokenBucket:
      return {{"level", v.level}, {"units_per_token", p.window_ms}};
    case algorithms::Algorithm::kLeakyBucket:
      return {{"level", v.level}, {"units_per_request", p.window_ms}};
    case algorithms::Algorithm::kSlidingLog:
      return {{"log_length", v.level}};
    case algorithms::Algorithm::kTwoBucket:
      return {{"count", v.level}, {"previous_count", v.previous}};
    case algorithms::Algorithm::kFixedWindow:
    case algorithms::Algorithm::kSubWindow:
      break;
  }
  return {{"count", v.level}};
}

}  // namespace tollgate::gateway
