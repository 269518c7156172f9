// The costs a request body gives its rules (gateway/core/request_cost.h):
// a JSON path's number, the body's size, an LLM preset's upper bound and
// the rewrite that bounds the output; per-model prices; a header's cost.
#include "gateway/core/request_cost.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "gateway/core/limits.h"

namespace tollgate::gateway {
namespace {

rules::RuleConfig Rule(rules::CostKind kind, std::int64_t cost_default = 1) {
  rules::RuleConfig rule;
  rule.name = "r";
  rule.cost = cost_default;
  rule.budget.cost = kind;
  return rule;
}

std::vector<rules::RuleHit> Hits(const std::vector<const rules::RuleConfig*>& rules) {
  std::vector<rules::RuleHit> hits(rules.size());
  for (std::size_t i = 0; i < rules.size(); ++i) hits[i].rule = rules[i];
  return hits;
}

TEST(RequestCost, AJsonPathsNumberElseTheDefault) {
  rules::RuleConfig rule = Rule(rules::CostKind::kJson, 3);
  rule.budget.cost_json = "job.units";
  std::vector<rules::RuleHit> hits = Hits({&rule});
  BodyCosts out;
  CostsFromBody(hits, R"({"job":{"units":42}})", {}, out);
  EXPECT_EQ(hits[0].cost, 42);
  CostsFromBody(hits, R"({"job":{}})", {}, out);
  EXPECT_EQ(hits[0].cost, 3);
  CostsFromBody(hits, "not json", {}, out);
  EXPECT_EQ(hits[0].cost, 3);
  EXPECT_FALSE(out.rewritten);
}

TEST(RequestCost, RequestBytesAreTheBodysSize) {
  const rules::RuleConfig rule = Rule(rules::CostKind::kRequestBytes);
  std::vector<rules::RuleHit> hits = Hits({&rule});
  BodyCosts out;
  CostsFromBody(hits, "12345", {}, out);
  EXPECT_EQ(hits[0].cost, 5);
}

TEST(RequestCost, AnOpenAiRequestReservesItsBytesAndItsOutputBound) {
  rules::RuleConfig rule = Rule(rules::CostKind::kOpenAi);
  rule.budget.settle = rules::SettleKind::kUsage;
  rule.budget.max_output_tokens = 50;
  std::vector<rules::RuleHit> hits = Hits({&rule});
  BodyCosts out;
  const std::string own = R"({"model":"gpt-4o","max_tokens":20,"messages":[]})";
  CostsFromBody(hits, own, {}, out);
  EXPECT_EQ(hits[0].cost, static_cast<std::int64_t>(own.size()) + 20);
  EXPECT_FALSE(out.rewritten);
  EXPECT_EQ(out.model, "gpt-4o");
  // Without a bound: the rule's, written into the request.
  const std::string bare = R"({"model":"gpt-4o","messages":[]})";
  CostsFromBody(hits, bare, {}, out);
  EXPECT_EQ(hits[0].cost, static_cast<std::int64_t>(bare.size()) + 50);
  ASSERT_TRUE(out.rewritten);
  EXPECT_NE(out.rewritten->find(R"("max_tokens":50)"), std::string::npos) << *out.rewritten;
}

TEST(RequestCost, SeveralPresetRulesReserveByTheBoundWritten) {
  rules::RuleConfig wide = Rule(rules::CostKind::kOpenAi);
  wide.budget.max_output_tokens = 500;
  rules::RuleConfig narrow = Rule(rules::CostKind::kOpenAi);
  narrow.budget.max_output_tokens = 30;
  narrow.budget.tokens = rules::TokenCount::kOutput;
  std::vector<rules::RuleHit> hits = Hits({&wide, &narrow});
  BodyCosts out;
  const std::string bare = R"({"messages":[]})";
  CostsFromBody(hits, bare, {}, out);
  EXPECT_EQ(hits[0].cost, static_cast<std::int64_t>(bare.size()) + 30);
  EXPECT_EQ(hits[1].cost, 30);
}

TEST(RequestCost, EstimateReservesAQuarterOfTheInput) {
  rules::RuleConfig rule = Rule(rules::CostKind::kAnthropic);
  rule.budget.max_output_tokens = 10;
  rule.budget.reserve = rules::Reserve::kEstimate;
  std::vector<rules::RuleHit> hits = Hits({&rule});
  BodyCosts out;
  const std::string body = R"({"model":"claude","max_tokens":8,"messages":[]})";
  CostsFromBody(hits, body, {}, out);
  EXPECT_EQ(hits[0].cost, (static_cast<std::int64_t>(body.size()) + 3) / 4 + 8);
  EXPECT_FALSE(out.rewritten);  // Anthropic requests are never rewritten
}

TEST(RequestCost, PricesTurnTokensIntoUnits) {
  const std::vector<rules::ModelPrice> prices = {
      {"gpt-4o-mini", 0.15, 0.6, 1'000'000}, {"gpt-4o*", 2.5, 10.0, 1'000'000}};
  EXPECT_EQ(PriceOf(prices, "gpt-4o-mini"), &prices[0]);
  EXPECT_EQ(PriceOf(prices, "gpt-4o-2024-08-06"), &prices[1]);
  EXPECT_EQ(PriceOf(prices, "o1"), nullptr);
  // 1M input at 2.5 and 1M output at 10: 12.5, rounded up.
  EXPECT_EQ(PricedCost(prices[1], 1'000'000, 1'000'000), 13);
  EXPECT_EQ(PricedCost(prices[1], 0, 0), 0);
  rules::RuleConfig rule = Rule(rules::CostKind::kOpenAi, 7);
  rule.budget.max_output_tokens = 100;
  rule.budget.tokens = rules::TokenCount::kPrice;
  std::vector<rules::RuleHit> hits = Hits({&rule});
  BodyCosts out;
  const std::string body = R"({"model":"gpt-4o","max_tokens":1000000,"messages":[]})";
  CostsFromBody(hits, body, prices, out);
  EXPECT_EQ(hits[0].cost, PricedCost(prices[1], static_cast<std::int64_t>(body.size()), 1'000'000));
  // A model without a price costs the rule's cost_default.
  CostsFromBody(hits, R"({"model":"o1","max_tokens":1,"messages":[]})", prices, out);
  EXPECT_EQ(hits[0].cost, 7);
}

TEST(RequestCost, AHeadersCostIsADecimalElseTheDefault) {
  EXPECT_EQ(CostFromHeader("12", 1), 12);
  EXPECT_EQ(CostFromHeader("0", 1), 0);
  EXPECT_EQ(CostFromHeader("", 1), 1);
  EXPECT_EQ(CostFromHeader("-3", 1), 1);
  EXPECT_EQ(CostFromHeader("3x", 1), 1);
  EXPECT_EQ(CostFromHeader("99999999999999999999", 1), 1);
}

}  // namespace
}  // namespace tollgate::gateway
