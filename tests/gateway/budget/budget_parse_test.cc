#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "gateway/budget/event_stream.h"
#include "gateway/budget/json_fields.h"
#include "gateway/budget/llm_request.h"
#include "gateway/budget/usage.h"

namespace tollgate::gateway::budget {
namespace {

// The body cut into pieces of `piece` bytes, as a network would.
template <typename Reader>
void FeedInPieces(Reader& reader, std::string_view body, std::size_t piece) {
  for (std::size_t i = 0; i < body.size(); i += piece) reader.Feed(body.substr(i, piece));
}

Usage Scan(LlmApi api, BodyFormat format, std::string_view body, std::size_t piece) {
  UsageScanner scanner(UsagePathsOf(api), format);
  FeedInPieces(scanner, body, piece);
  scanner.Finish();
  return scanner.usage();
}

constexpr std::string_view kOpenAiJson =
    R"({"id":"c1","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,)"
    R"("message":{"role":"assistant","content":"Hello \"usage\": 5"}}],)"
    R"("usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}})";

constexpr std::string_view kOpenAiStream =
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}],\"usage\":null}\n\n"
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"}}],\"usage\":null}\r\n\r\n"
    ": a comment\n"
    "data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":12,"
    "\"total_tokens\":21}}\n\n"
    "data: [DONE]\n\n";

constexpr std::string_view kAnthropicStream =
    "event: message_start\n"
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"model\":\"claude\",\"content\":[],"
    "\"usage\":{\"input_tokens\":25,\"cache_read_input_tokens\":5,\"output_tokens\":1}}}\n\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
    "event: message_delta\n"
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":15}}\n\n"
    "event: message_stop\n"
    "data: {\"type\":\"message_stop\"}\n\n";

constexpr std::string_view kResponsesStream =
    "event: response.created\n"
    "data: {\"type\":\"response.created\",\"response\":{\"id\":\"r1\",\"usage\":null}}\n\n"
    "event: response.output_text.delta\n"
    "data: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n"
    "event: response.completed\n"
    "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"r1\",\"usage\":"
    "{\"input_tokens\":30,\"output_tokens\":50,\"total_tokens\":80}}}\n\n";

TEST(UsageScannerTest, OpenAiJsonBodyInAnyPieces) {
  for (std::size_t piece = 1; piece <= kOpenAiJson.size(); ++piece) {
    const Usage u = Scan(LlmApi::kOpenAi, BodyFormat::kJson, kOpenAiJson, piece);
    ASSERT_EQ(u.Count(TokenCount::kTotal), 21) << piece;
    ASSERT_EQ(u.Count(TokenCount::kInput), 9) << piece;
    ASSERT_EQ(u.Count(TokenCount::kOutput), 12) << piece;
  }
}

TEST(UsageScannerTest, OpenAiStreamTakesTheUsageChunk) {
  for (std::size_t piece = 1; piece <= kOpenAiStream.size(); ++piece) {
    const Usage u = Scan(LlmApi::kOpenAi, BodyFormat::kEventStream, kOpenAiStream, piece);
    ASSERT_EQ(u.Count(TokenCount::kTotal), 21) << piece;
  }
}

TEST(UsageScannerTest, AnthropicStreamAddsStartAndDelta) {
  for (std::size_t piece = 1; piece <= kAnthropicStream.size(); ++piece) {
    const Usage u = Scan(LlmApi::kAnthropic, BodyFormat::kEventStream, kAnthropicStream, piece);
    ASSERT_EQ(u.Count(TokenCount::kInput), 30) << piece;  // 25 + 5 read from cache
    ASSERT_EQ(u.Count(TokenCount::kOutput), 15) << piece;
    ASSERT_EQ(u.Count(TokenCount::kTotal), 45) << piece;
  }
}

TEST(UsageScannerTest, AResetScannerReadsTheNextBodyAfresh) {
  for (const BodyFormat format : {BodyFormat::kJson, BodyFormat::kEventStream}) {
    const std::string_view body = format == BodyFormat::kJson ? kOpenAiJson : kOpenAiStream;
    UsageScanner scanner(UsagePathsOf(LlmApi::kOpenAi), format);
    scanner.Feed(body.substr(0, body.size() / 2));  // a response cut halfway
    scanner.Reset();
    scanner.Feed(body);
    scanner.Finish();
    EXPECT_EQ(scanner.usage().Count(TokenCount::kTotal), 21);
    scanner.Reset();
    scanner.Finish();  // an empty body says nothing
    EXPECT_EQ(scanner.usage().Count(TokenCount::kTotal), std::nullopt);
  }
}

TEST(UsageScannerTest, AnthropicJsonBody) {
  const Usage u = Scan(LlmApi::kAnthropic, BodyFormat::kJson,
                       R"({"id":"m","type":"message","usage":{"input_tokens":7,"output_tokens":3}})", 5);
  EXPECT_EQ(u.Count(TokenCount::kTotal), 10);
}

TEST(UsageScannerTest, ResponsesApiStreamTakesResponseCompleted) {
  for (std::size_t piece = 1; piece <= kResponsesStream.size(); piece += 3) {
    const Usage u = Scan(LlmApi::kOpenAi, BodyFormat::kEventStream, kResponsesStream, piece);
    ASSERT_EQ(u.Count(TokenCount::kTotal), 80) << piece;
    ASSERT_EQ(u.Count(TokenCount::kInput), 30) << piece;
  }
}

TEST(UsageScannerTest, ACutResponseSaysNothing) {
  // A JSON body cut after its usage is still not whole: nothing for sure.
  const std::string_view cut_json = kOpenAiJson.substr(0, kOpenAiJson.size() - 1);
  EXPECT_FALSE(Scan(LlmApi::kOpenAi, BodyFormat::kJson, cut_json, 7).Count(TokenCount::kTotal));
  // A stream cut before its usage chunk, and one cut within it.
  const std::size_t usage_chunk = kOpenAiStream.find("data: {\"id\":\"c1\",\"choices\":[],");
  EXPECT_FALSE(Scan(LlmApi::kOpenAi, BodyFormat::kEventStream, kOpenAiStream.substr(0, usage_chunk), 7)
                   .Count(TokenCount::kTotal));
  EXPECT_FALSE(Scan(LlmApi::kOpenAi, BodyFormat::kEventStream, kOpenAiStream.substr(0, usage_chunk + 60), 7)
                   .Count(TokenCount::kTotal));
  // Anthropic cut before message_delta: input known, output not.
  const std::size_t delta = kAnthropicStream.find("event: message_delta");
  const Usage u = Scan(LlmApi::kAnthropic, BodyFormat::kEventStream, kAnthropicStream.substr(0, delta), 7);
  EXPECT_EQ(u.Count(TokenCount::kInput), 30);
  EXPECT_FALSE(u.Count(TokenCount::kOutput));
  EXPECT_FALSE(u.Count(TokenCount::kTotal));
}

TEST(UsageScannerTest, ASinglePathAndHostileNumbers) {
  const UsagePaths paths = SinglePath("meta.cost");
  UsageScanner s(paths, BodyFormat::kJson);
  s.Feed(R"({"meta":{"cost":2.2},"other":[1,2,{"cost":99}]})");
  s.Finish();
  EXPECT_EQ(s.usage().Count(TokenCount::kTotal), 3);  // rounded up
  UsageScanner negative(paths, BodyFormat::kJson);
  negative.Feed(R"({"meta":{"cost":-5}})");
  negative.Finish();
  EXPECT_FALSE(negative.usage().Count(TokenCount::kTotal));
  UsageScanner huge(UsagePathsOf(LlmApi::kAnthropic), BodyFormat::kJson);
  huge.Feed(R"({"usage":{"input_tokens":18446744073709551615,"cache_read_input_tokens":9223372036854775807,"output_tokens":1}})");
  huge.Finish();
  EXPECT_EQ(huge.usage().Count(TokenCount::kInput), INT64_MAX);
}

// Events that cannot hold a wanted value are not parsed; those that can
// are, whether they name the key plainly, escaped, or beyond what an event
// holds back (kHeldEvent).
TEST(EventStreamFieldsTest, SkipsOnlyEventsThatCannotHoldTheValue) {
  const std::string filler(EventStreamFields::kHeldEvent, 'x');
  const std::vector<std::pair<std::string, std::optional<std::int64_t>>> cases = {
      {"data: {\"usage\":{\"total_tokens\":5}}\n\n", 5},
      {"data: {\"usage\":{\"total_tokens\" :\n data: 6}}\n\n", std::nullopt},
      {"data: {\"usage\":\ndata: {\"total_tokens\"\t:\ndata: 6}}\n\n", 6},
      {"data: {\"usage\":{\"total\\u005ftokens\":7}}\n\n", 7},
      {"data: {\"pad\":\"" + filler + "\",\"usage\":{\"total_tokens\":8}}\n\n", 8},
      {"data: {\"note\":\"total_tokens\",\"usage\":null}\n\n", std::nullopt},
      {"data: {\"usage\":null,\"total_tokens\":9}\n\n", std::nullopt},
  };
  for (const auto& [stream, want] : cases) {
    for (std::size_t piece : {std::size_t{1}, std::size_t{5}, stream.size()}) {
      EventStreamFields f({"usage.total_tokens"});
      // A value seen earlier stays unless an event that holds one follows.
      f.Feed("data: {\"usage\":{\"total_tokens\":1}}\n\n");
      FeedInPieces(f, stream, piece);
      EXPECT_EQ(f.Number(0), want.value_or(1)) << stream.substr(0, 60) << " piece " << piece;
    }
  }
}

TEST(UsageScannerTest, BodyFormatFromContentType) {
  EXPECT_EQ(BodyFormatOf("text/event-stream; charset=utf-8"), BodyFormat::kEventStream);
  EXPECT_EQ(BodyFormatOf("Text/Event-Stream"), BodyFormat::kEventStream);
  EXPECT_EQ(BodyFormatOf("application/json"), BodyFormat::kJson);
  EXPECT_EQ(BodyFormatOf(""), BodyFormat::kJson);
}

TEST(JsonFieldsTest, ArraysKeysAndStrings) {
  JsonFields f({"a.1.b", "s", "long"});
  std::string long_string(JsonFields::kMaxString + 1, 'x');
  const std::string text = R"({"a":[{"b":1},{"b":2,"c":[5]},{"b":3}],"s":"v\"w","long":")" +
                           long_string + "\"}";
  FeedInPieces(f, text, 3);
  ASSERT_TRUE(f.Finish());
  EXPECT_EQ(f.Number(0), 2);
  EXPECT_EQ(f.String(1), "v\"w");
  EXPECT_FALSE(f.String(2));
  f.Reset();
  EXPECT_FALSE(f.Number(0));
  EXPECT_FALSE(f.Feed("{\"a\":]"));
  EXPECT_EQ(NumberAt(R"({"x":{"y":[10,20]}})", "x.y.1"), 20);
  EXPECT_FALSE(NumberAt("not json", "x"));
}

// Subtrees no wanted path goes into are parsed but not followed: the same
// names inside them are not taken for the wanted ones, and a path that
// goes on after such a sibling is still found.
TEST(JsonFieldsTest, ValuesOutsideTheWantedPathsAreNotTaken) {
  JsonFields f({"usage.total", "x.1.usage", "x.1.y.0"});
  const std::string text =
      R"({"choices":[{"usage":{"total":9}},{"usage":{"total":8}}],"x":[{"usage":7},)"
      R"({"z":{"usage":6},"usage":5,"y":[4,{"y":3}]}],"usage":{"total":3,"more":{"total":2}}})";
  for (std::size_t piece : {std::size_t{1}, std::size_t{7}, text.size()}) {
    f.Reset();
    FeedInPieces(f, text, piece);
    ASSERT_TRUE(f.Finish());
    EXPECT_EQ(f.Number(0), 3);
    EXPECT_EQ(f.Number(1), 5);
    EXPECT_EQ(f.Number(2), 4);
  }
}

// The fields ReadLlmRequest reads (an Anthropic request: never rewritten).
std::optional<LlmRequest> Read(std::string_view body) {
  std::optional<std::string> rewritten;
  return ReadLlmRequest(body, LlmApi::kAnthropic, 0, rewritten);
}

// The body ReadLlmRequest would forward in place of `body`.
std::optional<std::string> Rewritten(const std::string& body, LlmApi api, std::int64_t bound) {
  std::optional<std::string> out;
  ReadLlmRequest(body, api, bound, out);
  return out;
}

TEST(LlmRequestTest, ReadsBoundsModelAndStream) {
  const std::string body =
      R"({"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":100,)"
      R"("stream":true,"stream_options":{"include_usage":true}})";
  const auto r = Read(body);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body_bytes, static_cast<std::int64_t>(body.size()));
  EXPECT_EQ(r->output_bound, 100);
  EXPECT_EQ(r->model, "gpt-4o");
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
  EXPECT_FALSE(r->responses_api);
  EXPECT_EQ(ReservedTokens(*r, 100, TokenCount::kTotal, Reserve::kUpperBound), r->body_bytes + 100);
  EXPECT_EQ(ReservedTokens(*r, 100, TokenCount::kTotal, Reserve::kEstimate), (r->body_bytes + 3) / 4 + 100);
  EXPECT_EQ(ReservedTokens(*r, 100, TokenCount::kOutput, Reserve::kUpperBound), 100);
  EXPECT_FALSE(Rewritten(body, LlmApi::kOpenAi, 500));  // nothing to add
  EXPECT_FALSE(Read("[1,2]"));
  EXPECT_FALSE(Read("{"));
}

TEST(LlmRequestTest, WritesTheBoundAndIncludeUsageOnlyWhenAbsent) {
  const std::string body = R"({"model":"m","messages":[],"stream":true})";
  const auto r = Read(body);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->output_bound);
  const auto rewritten = Rewritten(body, LlmApi::kOpenAi, 256);
  ASSERT_TRUE(rewritten);
  const auto again = Read(*rewritten);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->output_bound, 256);
  EXPECT_TRUE(again->include_usage);
  EXPECT_EQ(again->model, "m");
  // The Responses API's bound has its own name and needs no stream option.
  const std::string responses = R"({"model":"m","input":"hi","stream":true})";
  const auto rr = Read(responses);
  ASSERT_TRUE(rr && rr->responses_api);
  const auto rewritten_responses = Rewritten(responses, LlmApi::kOpenAi, 64);
  ASSERT_TRUE(rewritten_responses);
  EXPECT_NE(rewritten_responses->find("\"max_output_tokens\":64"), std::string::npos);
  EXPECT_EQ(rewritten_responses->find("stream_options"), std::string::npos);
  // Anthropic requires max_tokens itself: never rewritten.
  EXPECT_FALSE(Rewritten(body, LlmApi::kAnthropic, 256));
}

// The additions go in as text, the client's bytes kept; a key that is
// there with a value that is no count, or stream options without
// include_usage, are replaced in the parsed request instead.
TEST(LlmRequestTest, RewritesKeepTheClientsBytesOrReplaceWhatIsThere) {
  EXPECT_EQ(Rewritten(R"( {"messages":[], "stream":true} )", LlmApi::kOpenAi, 8),
            R"( {"messages":[], "stream":true,"max_tokens":8,"stream_options":{"include_usage":true}} )");
  EXPECT_EQ(Rewritten("{}", LlmApi::kOpenAi, 8), R"({"max_tokens":8})");
  for (const std::string body :
       {R"({"messages":[],"max_tokens":null,"stream":true})",
        R"({"messages":[],"stream":true,"stream_options":{"x":1}})",
        R"({"messages":[],"stream":true,"stream_options":false})"}) {
    const auto rewritten = Rewritten(body, LlmApi::kOpenAi, 8);
    ASSERT_TRUE(rewritten) << body;
    const auto again = Read(*rewritten);
    ASSERT_TRUE(again) << *rewritten;
    EXPECT_EQ(again->output_bound, 8) << *rewritten;
    EXPECT_TRUE(again->include_usage) << *rewritten;
    EXPECT_EQ(rewritten->find("null"), std::string::npos) << *rewritten;
  }
}

}  // namespace
}  // namespace tollgate::gateway::budget
