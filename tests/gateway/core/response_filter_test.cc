// What tollgate does to an upstream's response before the client sees it
// (gateway/core/response_filter.h): hop-by-hop fields of an HTTP/1.1
// upstream, Via by the upstream's protocol, the shown rule's RateLimit
// fields, a WebSocket 101's upgrade fields, the body observer; and the one
// mapping of a failed request body to its answer (RefuseBody).
#include "gateway/core/response_filter.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gateway/core/respond.h"
#include "gateway/core/gateway_state.h"
#include "rules/config.h"
#include "tests/gateway/test_support.h"

namespace tollgate::gateway {
namespace {

// The rule whose fields a client is shown.
constexpr const char* kRule =
    "[[rules]]\nname = \"shown\"\nkey = \"ip\"\nalgorithm = \"token_bucket\"\n"
    "limit = 1000\nwindow = \"1m\"\n";

class ResponseFilterTest : public ::testing::Test {
 protected:
  enum class Via { kOff, kOn };
  void Load(const std::string& extra, Via via = Via::kOff) {
    std::string toml = testing::BasicConfig(extra);
    if (via == Via::kOn) toml.replace(toml.find("threads = 1"), 11, "threads = 1\nvia = true");
    loaded_ = rules::LoadConfigText(testing::WithEchoPort(toml, 9), "t.toml");
    ASSERT_TRUE(loaded_.config) << loaded_.errors[0].ToString();
    state_.config = std::make_shared<const rules::Config>(*loaded_.config);
  }
  const rules::Config& config() const { return *state_.config; }
  const rules::UpstreamConfig& upstream() const { return state_.config->upstreams[0]; }

  // An upstream's response as Beast parsed it.
  static http::response_header<Fields> Response() {
    http::response_header<Fields> res;
    res.result(http::status::ok);
    res.set(http::field::content_type, "text/plain");
    res.set(http::field::connection, "keep-alive, X-Private");
    res.set("X-Private", "hop");
    res.set(http::field::keep_alive, "timeout=5");
    res.set(http::field::transfer_encoding, "chunked");
    res.set(http::field::trailer, "grpc-status");
    return res;
  }

  rules::LoadResult loaded_;
  GatewayState state_;
  Exchange ex_;
  std::string lines_ = "(stale)";
};

TEST_F(ResponseFilterTest, Http1UpstreamLosesHopByHopFieldsAndGetsVia) {
  Load("", Via::kOn);
  auto res = Response();
  ResponseFilter(ex_).Head(state_, nullptr, upstream(), UpstreamProtocol::kHttp1, res, lines_);
  EXPECT_EQ(ex_.status, 200u);
  EXPECT_EQ(res[http::field::content_type], "text/plain");
  for (const char* gone :
       {"Connection", "X-Private", "Keep-Alive", "Transfer-Encoding", "Trailer"}) {
    EXPECT_EQ(res.find(gone), res.end()) << gone;
  }
  EXPECT_EQ(res[http::field::via], "1.1 tollgate");
  EXPECT_EQ(lines_, "");  // no rule shown
}

TEST_F(ResponseFilterTest, Http2UpstreamKeepsItsFieldsAndViaSaysTwo) {
  Load("", Via::kOn);
  auto res = Response();
  ResponseFilter(ex_).Head(state_, nullptr, upstream(), UpstreamProtocol::kHttp2, res, lines_);
  // HTTP/2 fields hold no hop-by-hop ones (nghttp2 refuses them): what
  // framing reads, Trailer among them, stays for the client's adapter.
  EXPECT_EQ(res[http::field::trailer], "grpc-status");
  EXPECT_EQ(res[http::field::via], "2 tollgate");
}

TEST_F(ResponseFilterTest, NoViaUnlessConfigured) {
  Load("");
  auto res = Response();
  ResponseFilter(ex_).Head(state_, nullptr, upstream(), UpstreamProtocol::kHttp1, res, lines_);
  EXPECT_EQ(res.find(http::field::via), res.end());
}

TEST_F(ResponseFilterTest, ShownRuleGivesRateLimitLines) {
  Load(kRule);
  algorithms::Decision decision;
  decision.allowed = true;
  decision.remaining = 999;
  decision.window_reset_ms = 60;
  ex_.limits.shown = &config().rules[0];
  ex_.limits.shown_decision = decision;
  auto res = Response();
  ResponseFilter(ex_).Head(state_, nullptr, upstream(), UpstreamProtocol::kHttp1, res, lines_);
  std::string expected;
  AppendRateLimitHeaders(config().rules[0], decision, expected);
  EXPECT_FALSE(expected.empty());
  EXPECT_EQ(lines_, expected);
}

TEST_F(ResponseFilterTest, WebSocketUpgradeKeepsItsUpgradeFields) {
  Load("", Via::kOn);
  http::response_header<Fields> res;
  res.result(http::status::switching_protocols);
  res.set(http::field::upgrade, "WebSocket");
  res.set(http::field::connection, "upgrade");
  res.set(http::field::sec_websocket_accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
  ResponseFilter(ex_).Head(state_, nullptr, upstream(), UpstreamProtocol::kHttp1, res, lines_,
                           ResponseKind::kWebSocketUpgrade);
  EXPECT_EQ(ex_.status, 101u);
  EXPECT_EQ(res[http::field::upgrade], "websocket");
  EXPECT_EQ(res[http::field::connection], "Upgrade");
  EXPECT_EQ(res[http::field::sec_websocket_accept], "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
  EXPECT_EQ(res[http::field::via], "1.1 tollgate");
}

class Recorder final : public ResponseBodyObserver {
 public:
  void OnResponseHead(unsigned status, const ResponseFields& fields) override {
    head_status = status;
    content_type = fields.Get("content-type");
    private_field = fields.Get("X-Private");
  }
  void OnResponseBody(std::string_view piece) override { pieces.emplace_back(piece); }
  void OnResponseEnd() override { ++ends; }
  std::vector<std::string> pieces;
  int ends = 0;
  unsigned head_status = 0;
  std::string content_type;
  std::string private_field;
};

TEST_F(ResponseFilterTest, BodyObserverSeesEveryPieceThenTheEnd) {
  Load("");
  Recorder recorder;
  ex_.body_observer = &recorder;
  const ResponseFilter filter(ex_);
  // The head as the upstream said it, before its hop-by-hop fields go.
  auto res = Response();
  filter.Head(state_, nullptr, upstream(), UpstreamProtocol::kHttp1, res, lines_);
  EXPECT_EQ(recorder.head_status, 200u);
  EXPECT_EQ(recorder.content_type, "text/plain");
  EXPECT_EQ(recorder.private_field, "hop");
  filter.Body("data: {\"tokens\":");
  filter.Body(std::string_view("12}\n\nrest", 5));
  filter.End();
  EXPECT_EQ(recorder.pieces, (std::vector<std::string>{"data: {\"tokens\":", "12}\n\n"}));
  EXPECT_EQ(recorder.ends, 1);
  ex_.Reset();  // the next exchange has none until something sets it
  EXPECT_EQ(ex_.body_observer, nullptr);
}

TEST_F(ResponseFilterTest, WithoutAnObserverTheBodyPassesUnseen) {
  Load("");
  const ResponseFilter filter(ex_);
  filter.Body("x");
  filter.End();
  SUCCEED();
}

TEST(RefuseBody, EachFailureHasOneAnswer) {
  Answer answer;
  ASSERT_TRUE(RefuseBody(BodyFailure::kTooLarge, answer));
  EXPECT_EQ(answer.Status(), 413u);
  ASSERT_TRUE(RefuseBody(BodyFailure::kTimeout, answer));
  EXPECT_EQ(answer.Status(), 408u);
  EXPECT_EQ(answer.Message(), kBodyTimeoutMessage);
  ASSERT_TRUE(RefuseBody(BodyFailure::kMalformed, answer));
  EXPECT_EQ(answer.Status(), 400u);
  EXPECT_EQ(answer.Message(), kBadBodyMessage);
  answer = Refuse(Refusal::kNoRoute);
  EXPECT_FALSE(RefuseBody(BodyFailure::kClientGone, answer));
  EXPECT_EQ(answer.refusal, Refusal::kNoRoute);  // untouched: nobody to answer
}

}  // namespace
}  // namespace tollgate::gateway
