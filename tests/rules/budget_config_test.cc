// The budget keys of a rule (rules/budget.h), json:PATH key parts and
// [[prices]], and the errors of what cannot be, at their position.
#include "rules/budget_config.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "config_text.h"

namespace tollgate::rules {
namespace {

std::string Rule(std::string_view name, std::string_view algorithm, std::string_view extra) {
  return fmt::format(R"([[rules]]
name = "{}"
key = "user"
algorithm = "{}"
limit = 1000
window = "1m"
{})",
                     name, algorithm, extra);
}

TEST(BudgetConfig, EveryFormIsRead) {
  LoadResult r = LoadConfigText(
      std::string(kMinimal) + R"([[prices]]
model = "gpt-4o*"
input = 2.5
output = 10
unit = "1M"
)" + Rule("header", "token_bucket", "cost = { header = \"X-Cost\" }\ncost_default = 3\n") +
          Rule("json", "fixed_window",
               "cost = { json = \"a.b\" }\nsettle = { json = \"usage.total_tokens\" }\n") +
          Rule("bytes", "two_bucket", "cost = \"request_bytes\"\nsettle = \"response_bytes\"\n") +
          Rule("llm", "token_bucket",
               "cost = \"openai\"\ntokens = \"price\"\nreserve = \"estimate\"\n"
               "max_output_tokens = 500\n") +
          Rule("fixed", "sliding_log", "cost = 7\n"),
      "t.toml");
  ASSERT_TRUE(r.config) << r.errors.front().ToString();
  const std::vector<RuleConfig>& rules = r.config->rules;
  EXPECT_EQ(rules[0].budget.cost, CostKind::kHeader);
  EXPECT_EQ(rules[0].budget.cost_header, "X-Cost");
  EXPECT_EQ(rules[0].cost, 3);
  EXPECT_FALSE(rules[0].budget.Settles());
  EXPECT_EQ(rules[1].budget.cost, CostKind::kJson);
  EXPECT_EQ(rules[1].budget.cost_json, "a.b");
  EXPECT_EQ(rules[1].budget.settle, SettleKind::kJson);
  EXPECT_EQ(rules[1].budget.settle_json, "usage.total_tokens");
  EXPECT_EQ(rules[1].cost, 1);
  EXPECT_EQ(rules[2].budget.cost, CostKind::kRequestBytes);
  EXPECT_EQ(rules[2].budget.settle, SettleKind::kResponseBytes);
  EXPECT_EQ(rules[3].budget.cost, CostKind::kOpenAi);
  EXPECT_EQ(rules[3].budget.settle, SettleKind::kUsage);
  EXPECT_EQ(rules[3].budget.tokens, TokenCount::kPrice);
  EXPECT_EQ(rules[3].budget.reserve, Reserve::kEstimate);
  EXPECT_EQ(rules[3].budget.max_output_tokens, 500);
  EXPECT_EQ(rules[4].budget.cost, CostKind::kFixed);
  EXPECT_EQ(rules[4].cost, 7);
  ASSERT_EQ(r.config->prices.size(), 1u);
  EXPECT_EQ(r.config->prices[0].model, "gpt-4o*");
  EXPECT_EQ(r.config->prices[0].input, 2.5);
  EXPECT_EQ(r.config->prices[0].output, 10.0);
  EXPECT_EQ(r.config->prices[0].unit_tokens, 1'000'000);
}

TEST(BudgetConfig, ErrorsArePlaced) {
  const std::vector<std::string> errors =
      Errors(std::string(kMinimal) +
             Rule("log", "sliding_log", "settle = { header = \"X-Usage\" }\n") +          // 8
             Rule("path", "fixed_window", "cost = { json = \"usage..total\" }\n") +       // 15
             Rule("both", "fixed_window", "cost = { header = \"X\", json = \"a\" }\n") +  // 22
             Rule("preset", "token_bucket", "cost = \"anthropic\"\n") +                   // 29
             Rule("default", "token_bucket", "cost_default = 2\ntokens = \"input\"\n") +  // 36
             Rule("price", "token_bucket",
                  "cost = \"openai\"\nmax_output_tokens = 9\n"
                  "tokens = \"price\"\n") +                                   // 44
             Rule("kind", "token_bucket", "cost = \"lots\"\nsettle = 5\n"));  // 52
  const std::vector<std::string> expected = {
      R"(t.toml:14:10: sliding_log cannot settle a reservation (its state does not say which )"
      R"(units one request took): choose another algorithm, or no settling (docs/algorithms.md))",
      R"(t.toml:21:17: "cost": "usage..total" is not a JSON path: an empty name between dots )"
      R"(("a..b", or a dot at an end))",
      R"(t.toml:28:8: "cost" as a table names either a header or a JSON path: )"
      R"({ header = "X-Name" } or { json = "a.b" })",
      R"(t.toml:35:8: cost = "openai" and "anthropic" need "max_output_tokens": the output )"
      R"(bound reserved (and written into the request) when the request sets none)",
      R"(t.toml:42:16: "cost_default" applies to cost = { header = ... } or { json = ... } )"
      R"(only: the cost when the request does not say)",
      R"(t.toml:43:10: "tokens" applies to cost = "openai" and "anthropic" only)",
      R"(t.toml:52:10: tokens = "price" needs [[prices]] entries)",
      R"(t.toml:59:8: "cost" must be an integer, one of "request_bytes", "openai", )"
      R"("anthropic" or a table; got "lots")",
      R"(t.toml:60:10: "settle" must be one of "response_bytes" or a table; got an integer)",
  };
  EXPECT_EQ(errors, expected);
}

TEST(BudgetConfig, JsonKeyPartsComeLast) {
  LoadResult r = LoadConfigText(
      std::string(kMinimal) + R"([[rules]]
name = "per-model"
key = ["json:model", "header:X-Team"]
algorithm = "fixed_window"
limit = 1000
window = "1m"
)",
      "t.toml");
  ASSERT_TRUE(r.config) << r.errors.front().ToString();
  const RuleConfig& rule = r.config->rules[0];
  ASSERT_EQ(rule.key.size(), 2u);
  EXPECT_EQ(rule.key[0].kind, KeyPartKind::kHeader);
  EXPECT_EQ(rule.key[1].kind, KeyPartKind::kJson);
  EXPECT_EQ(rule.key[1].header, "model");
  EXPECT_TRUE(rule.body_key);
  EXPECT_EQ(rule.KeyKind(), "header:X-Team+json:model");
}

TEST(BudgetConfig, JsonKeyPartErrors) {
  const std::vector<std::string> errors =
      Errors(std::string(kMinimal) +
             R"([[rules]]
name = "bad-path"
key = "json:a..b"
algorithm = "fixed_window"
limit = 10
window = "1m"
[[rules]]
name = "messages"
key = ["ip", "json:model"]
per = "message"
algorithm = "fixed_window"
limit = 10
window = "1m"
)");
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_NE(errors[0].find(R"("json:a..b" in "key": "a..b" is not a JSON path)"), std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("needs the request body"), std::string::npos) << errors[1];
}

TEST(BudgetConfig, JsonPaths) {
  EXPECT_EQ(JsonPathProblem("usage.total_tokens"), "");
  EXPECT_EQ(JsonPathProblem("choices.0.index"), "");
  EXPECT_NE(JsonPathProblem(""), "");
  EXPECT_NE(JsonPathProblem(".a"), "");
  EXPECT_NE(JsonPathProblem("a."), "");
  EXPECT_NE(JsonPathProblem(std::string(300, 'a')), "");
  EXPECT_NE(JsonPathProblem("a\tb"), "");
}

}  // namespace
}  // namespace tollgate::rules
