// Token budgets end to end: a real gateway in front of a fake LLM API
// (tests/gateway/fake_llm.py, OpenAI- and Anthropic-shaped JSON and event
// streams with usage the test knows or reads back), on the local store and
// on Redis: a request reserves its upper bound, the response settles it,
// concurrent requests never spend more than the budget, a cut response
// keeps its reservation, the output bound and a stream's usage are asked
// for only when the request lacks them, and a stream reaches the client as
// the upstream sends it. The manual clock holds every window still.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/beast/http/read.hpp>
#include <boost/json/parse.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "admin.h"
#include "files.h"
#include "net.h"
#include "prometheus.h"
#include "redis_server.h"
#include "test_support.h"

namespace tollgate::testing {
namespace {

namespace json = boost::json;

// The fake LLM API, started for the test.
class FakeLlm {
 public:
  FakeLlm() : process_({"/usr/bin/python3", TOLLGATE_FAKE_LLM}) {
    const std::string line = process_.StderrLine();
    std::smatch match;
    if (std::regex_search(line, match, std::regex("port (\\d+)"))) {
      port_ = static_cast<std::uint16_t>(std::stoi(match[1]));
    }
    EXPECT_NE(port_, 0) << line;
  }
  std::uint16_t port() const { return port_; }

 private:
  Process process_;
  std::uint16_t port_ = 0;
};

std::string Rule(const std::string& cost_keys, std::int64_t limit) {
  return R"(
[[rules]]
name = "team-tokens"
key = "header:X-Team"
algorithm = "fixed_window"
window = "1m"
limit = )" + std::to_string(limit) +
         "\n" + cost_keys + "\n";
}

const std::string kOpenAi = "cost = \"openai\"\nmax_output_tokens = 50";

// A chat completion request's body, `extra` members added.
std::string ChatBody(const std::string& extra = "") {
  return R"({"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hi."}])" + extra +
         "}";
}

std::string Post(const std::string& path, const std::string& team, const std::string& body,
                 const std::string& headers = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n" +
         "X-Team: " + team + "\r\n" + headers + "Content-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

// The remaining units a RateLimit field in `text` shows (-1 when none).
std::int64_t RemainingIn(const std::string& text) {
  std::smatch match;
  if (!std::regex_search(text, match, std::regex(";r=(\\d+)"))) return -1;
  return std::stoll(match[1]);
}
std::int64_t Remaining(const Response& res) { return RemainingIn(std::string(res["RateLimit"])); }

// The curl command of an HTTP/2 (prior knowledge) client sending team
// "a"'s chat completion `body` (written into `dir`) to `port`, with
// X-Test-Usage `usage`; it prints the response's head and body.
std::string CurlChat(const TempDir& dir, const std::string& body, std::uint16_t port,
                     const std::string& usage) {
  return "curl -sS --http2-prior-knowledge -D - -H 'X-Team: a' -H 'X-Test-Usage: " + usage +
         "' -H 'Content-Type: application/json' --data-binary @" + dir.Write("body.json", body) +
         " http://127.0.0.1:" + std::to_string(port) + "/v1/chat/completions";
}

// Reads from `client`'s socket into `seen` until it holds `marker`; false
// when the connection failed first.
bool ReadUntil(Client& client, const std::string& marker, std::string& seen) {
  while (seen.find(marker) == std::string::npos) {
    char piece[512];
    boost::system::error_code ec;
    const std::size_t n = client.socket().read_some(boost::asio::buffer(piece), ec);
    if (ec) return false;
    seen.append(piece, n);
  }
  return true;
}

class TokenBudget : public ::testing::TestWithParam<bool> {
 protected:
  // `rules` on the local store, or on Redis when the parameter says so.
  std::string Config(const std::string& rules) {
    std::string store;
    if (GetParam()) {
      redis_ = std::make_unique<RedisServer>();
      store = RedisStoreSection("url = \"" + redis_->url() + "\"", "deny", "500ms",
                                "time = \"client\"\n");
    }
    return BasicConfig(store + rules);
  }
  FakeLlm llm_;
  std::unique_ptr<RedisServer> redis_;
};

TEST_P(TokenBudget, AReservationSettlesToTheUsage) {
  TestGateway gateway(Config(Rule(kOpenAi, 100'000)), llm_.port());
  Client client(gateway.port());
  const std::string body = ChatBody(R"(,"max_tokens":40)");
  client.Send(Post("/v1/chat/completions", "a", body, "X-Test-Usage: 7,5\r\n"));
  const Response first = client.Read();
  ASSERT_EQ(first.result_int(), 200) << first.body();
  // Reserved: the body's bytes and the request's own output bound.
  const std::int64_t reserved = static_cast<std::int64_t>(body.size()) + 40;
  EXPECT_EQ(Remaining(first), 100'000 - reserved);
  client.Send(Post("/v1/chat/completions", "a", body, "X-Test-Usage: 1,1\r\n"));
  const Response second = client.Read();
  ASSERT_EQ(second.result_int(), 200) << second.body();
  // The first settled to its 12 tokens; the second is reserved whole.
  EXPECT_EQ(Remaining(second), 100'000 - 12 - reserved);
}

TEST_P(TokenBudget, ACutResponseKeepsItsReservation) {
  TestGateway gateway(Config(Rule(kOpenAi, 100'000)), llm_.port());
  const std::string body = ChatBody(R"(,"max_tokens":40)");
  const std::int64_t reserved = static_cast<std::int64_t>(body.size()) + 40;
  {
    Client client(gateway.port());
    client.Send(Post("/v1/chat/completions", "a", body, "X-Test-Usage: 7,5\r\nX-Test-Cut: 1\r\n"));
    client.ReadToClose();
  }
  Client client(gateway.port());
  client.Send(Post("/v1/chat/completions", "a", body, "X-Test-Usage: 1,1\r\n"));
  const Response next = client.Read();
  ASSERT_EQ(next.result_int(), 200) << next.body();
  EXPECT_EQ(Remaining(next), 100'000 - 2 * reserved);
}

TEST_P(TokenBudget, TheOutputBoundAndUsageAreAskedForOnlyWhenAbsent) {
  TestGateway gateway(Config(Rule(kOpenAi, 100'000)), llm_.port());
  Client client(gateway.port());
  // No bound: the rule's is written into the request and reserved.
  const std::string bare = ChatBody();
  client.Send(Post("/v1/chat/completions", "a", bare, "X-Test-Usage: 1,1\r\n"));
  Response res = client.Read();
  ASSERT_EQ(res.result_int(), 200) << res.body();
  EXPECT_EQ(json::parse(res.body()).at("seen").at("max_tokens"), 50) << res.body();
  EXPECT_EQ(Remaining(res), 100'000 - static_cast<std::int64_t>(bare.size()) - 50);
  // The request's own bound stays as it is.
  client.Send(Post("/v1/chat/completions", "a", ChatBody(R"(,"max_tokens":7)")));
  res = client.Read();
  EXPECT_EQ(json::parse(res.body()).at("seen").at("max_tokens"), 7) << res.body();
  // A stream is asked for its usage, and settles by it.
  client.Send(Post("/v1/chat/completions", "a", ChatBody(R"(,"max_tokens":9,"stream":true)"),
                   "X-Test-Usage: 3,4\r\n"));
  res = client.Read();
  ASSERT_EQ(res.result_int(), 200);
  EXPECT_NE(res.body().find(R"("include_usage": true)"), std::string::npos) << res.body();
  EXPECT_NE(res.body().find(R"("total_tokens": 7)"), std::string::npos) << res.body();
  // A stream that set include_usage itself is forwarded as it is.
  const std::string own = ChatBody(
      R"(,"max_tokens":9,"stream":true,"stream_options":{"include_usage":true})");
  client.Send(Post("/v1/chat/completions", "a", own));
  res = client.Read();
  EXPECT_NE(res.body().find(R"("bytes": )" + std::to_string(own.size())), std::string::npos)
      << res.body();
}

TEST_P(TokenBudget, AnthropicStreamsSettleFromTheirEvents) {
  TestGateway gateway(Config(Rule("cost = \"anthropic\"\nmax_output_tokens = 50", 100'000)),
                      llm_.port());
  Client client(gateway.port());
  const std::string body =
      R"({"model":"claude-x","max_tokens":30,"stream":true,"messages":[{"role":"user","content":"hi"}]})";
  client.Send(Post("/v1/messages", "a", body, "X-Test-Usage: 11,6\r\n"));
  const Response first = client.Read();
  ASSERT_EQ(first.result_int(), 200);
  EXPECT_NE(first.body().find("message_delta"), std::string::npos);
  client.Send(Post("/v1/messages", "a", body, "X-Test-Usage: 1,1\r\n"));
  const Response second = client.Read();
  EXPECT_EQ(Remaining(second), 100'000 - 17 - static_cast<std::int64_t>(body.size()) - 30);
}

// The Responses API: the rule's output bound is written in as
// max_output_tokens (a stream needs no stream_options: its
// response.completed event carries the usage), and the reservation settles
// to that usage, streamed or not.
TEST_P(TokenBudget, ResponsesApiRequestsSettleFromTheirUsage) {
  TestGateway gateway(Config(Rule(kOpenAi, 100'000)), llm_.port());
  Client client(gateway.port());
  const std::string stream = R"({"model":"gpt-4o-mini","input":"hi","stream":true})";
  client.Send(Post("/v1/responses", "a", stream, "X-Test-Usage: 11,6\r\n"));
  const Response first = client.Read();
  ASSERT_EQ(first.result_int(), 200) << first.body();
  EXPECT_NE(first.body().find("response.completed"), std::string::npos);
  EXPECT_NE(first.body().find(R"("max_tokens": 50)"), std::string::npos) << first.body();
  EXPECT_NE(first.body().find(R"("include_usage": false)"), std::string::npos) << first.body();
  const std::string whole = R"({"model":"gpt-4o-mini","input":"hi","max_output_tokens":20})";
  client.Send(Post("/v1/responses", "a", whole, "X-Test-Usage: 3,4\r\n"));
  const Response second = client.Read();
  ASSERT_EQ(second.result_int(), 200) << second.body();
  EXPECT_EQ(json::parse(second.body()).at("usage").at("total_tokens").as_int64(), 7);
  // The first settled to 17 before the second reserved its bytes + 20.
  EXPECT_EQ(Remaining(second), 100'000 - 17 - static_cast<std::int64_t>(whole.size()) - 20);
  client.Send(Post("/v1/responses", "a", whole, "X-Test-Usage: 1,1\r\n"));
  const Response third = client.Read();
  EXPECT_EQ(Remaining(third), 100'000 - 17 - 7 - static_cast<std::int64_t>(whole.size()) - 20);
}

// What 64 clients of two teams spent, each sending `requests` one after
// another until refused, spread over the gateways on `ports`.
struct Spent {
  std::int64_t team[2] = {0, 0};
  int refused = 0;
};
Spent SpendConcurrently(const std::vector<std::uint16_t>& ports, int requests) {
  std::atomic<std::int64_t> spent[2] = {0, 0};
  std::atomic<int> refused{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 64; ++c) {
    clients.emplace_back([&, c] {
      const int team = c % 2;
      Client client(ports[static_cast<std::size_t>(c / 2) % ports.size()], 20'000);
      for (int i = 0; i < requests; ++i) {
        client.Send(Post("/v1/chat/completions", team == 0 ? "a" : "b", ChatBody()));
        const Response res = client.Read();
        if (res.result_int() == 429) {
          ++refused;
          continue;
        }
        ASSERT_EQ(res.result_int(), 200) << res.body();
        spent[team] += json::parse(res.body()).at("usage").at("total_tokens").as_int64();
      }
    });
  }
  for (std::thread& t : clients) t.join();
  Spent out;
  out.team[0] = spent[0];
  out.team[1] = spent[1];
  out.refused = refused;
  return out;
}

// 64 clients of two teams at once, each sending until refused: the tokens
// the responses say were used never add up to more than the budget.
TEST_P(TokenBudget, ConcurrentRequestsNeverSpendBeyondTheBudget) {
  constexpr std::int64_t kBudget = 3000;
  TestGateway gateway(Config(Rule(kOpenAi, kBudget)), llm_.port());
  const Spent spent = SpendConcurrently({gateway.port()}, 8);
  EXPECT_GT(spent.refused, 0);
  for (const std::int64_t team : spent.team) {
    EXPECT_LE(team, kBudget);
    // Refunds come back: most of the budget is used, not just reserved.
    EXPECT_GT(team, kBudget / 2);
  }
}

// Reservations in flight count: while ten streams wait, only as many as
// their upper bounds fit are let through.
TEST_P(TokenBudget, ReservationsStopABurstBeforeItIsSpent) {
  const std::string body = ChatBody(R"(,"max_tokens":100,"stream":true)");
  const std::int64_t reserved = static_cast<std::int64_t>(body.size()) + 100;
  TestGateway gateway(Config(Rule(kOpenAi, 3 * reserved)), llm_.port());
  std::vector<std::unique_ptr<Client>> clients;
  int admitted = 0;
  int limited = 0;
  for (int i = 0; i < 10; ++i) {
    clients.push_back(std::make_unique<Client>(gateway.port()));
    clients.back()->Send(
        Post("/v1/chat/completions", "a", body, "X-Test-Wait: 1\r\nX-Test-Usage: 1,1\r\n"));
    http::response_parser<http::string_body> head;
    boost::system::error_code ec;
    http::read_header(clients.back()->socket(), clients.back()->buffer(), head, ec);
    ASSERT_FALSE(ec) << ec.message();
    (head.get().result_int() == 200 ? admitted : limited) += 1;
  }
  EXPECT_EQ(admitted, 3);
  EXPECT_EQ(limited, 7);
  // The admin API shows the three reservations in flight, then none.
  const std::string key = "/api/v1/keys?rule=team-tokens&header:X-Team=a";
  Response view = AdminRequest(gateway.admin_port(), "GET", key);
  ASSERT_EQ(view.result_int(), 200) << view.body();
  EXPECT_EQ(json::parse(view.body()).at("reserved_in_flight"), 3 * reserved) << view.body();
  Client release(llm_.port());
  release.Send("POST /v1/release HTTP/1.1\r\nHost: llm\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(release.Read().result_int(), 200);
  for (int i = 0; i < 3 * 200; ++i) {  // the streams end when released
    view = AdminRequest(gateway.admin_port(), "GET", key);
    if (json::parse(view.body()).at("reserved_in_flight") == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(json::parse(view.body()).at("reserved_in_flight"), 0) << view.body();
}

// A request the upstream never sees (here refused by the upstream's own
// max_connections while a stream holds its one place) gives its
// reservation back; the held stream's settles to its usage.
TEST_P(TokenBudget, ARequestRefusedBeforeTheUpstreamGivesItsReservationBack) {
  const std::string body = ChatBody(R"(,"max_tokens":100,"stream":true)");
  const std::int64_t reserved = static_cast<std::int64_t>(body.size()) + 100;
  std::string config = Config(Rule(kOpenAi, 100'000));
  const std::string servers = "servers = [\"127.0.0.1:{ECHO}\"]\n";
  config.insert(config.find(servers) + servers.size(), "max_connections = 1\n");
  TestGateway gateway(config, llm_.port());
  Client held(gateway.port());
  held.Send(Post("/v1/chat/completions", "a", body, "X-Test-Wait: 1\r\nX-Test-Usage: 2,3\r\n"));
  http::response_parser<http::string_body> head;
  boost::system::error_code ec;
  http::read_header(held.socket(), held.buffer(), head, ec);
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_EQ(head.get().result_int(), 200);
  Client refused(gateway.port());
  refused.Send(Post("/v1/chat/completions", "a", body));
  EXPECT_EQ(refused.Read().result_int(), 503);
  Client release(llm_.port());
  release.Send("POST /v1/release HTTP/1.1\r\nHost: llm\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(release.Read().result_int(), 200);
  std::string rest;
  ASSERT_TRUE(ReadUntil(held, "0\r\n\r\n", rest));
  // Once the held stream has settled (nothing in flight), only its usage
  // (5) is spent when the next request reserves: not the refused one's.
  const std::string key = "/api/v1/keys?rule=team-tokens&header:X-Team=a";
  for (int i = 0; i < 400; ++i) {
    const Response view = AdminRequest(gateway.admin_port(), "GET", key);
    if (json::parse(view.body()).at("reserved_in_flight") == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  Client next(gateway.port());
  next.Send(Post("/v1/chat/completions", "a", ChatBody(), "X-Test-Usage: 1,1\r\n"));
  const std::int64_t next_reserved = static_cast<std::int64_t>(ChatBody().size()) + 50;
  EXPECT_EQ(Remaining(next.Read()), 100'000 - 5 - next_reserved) << "refused: " << reserved;
  // The refund is counted as the settles are: what is refunded was reserved
  // (all of the refused request's, and what the two others did not use).
  const std::string series = R"(tollgate_ratelimit_cost_total{rule="team-tokens",phase=")";
  const std::int64_t refunded = reserved + (reserved - 5) + (next_reserved - 2);
  std::string metrics;
  for (int i = 0; i < 400; ++i) {  // a settle's count comes with the store's answer
    metrics = AdminRequest(gateway.admin_port(), "GET", "/metrics").body();
    if (IntSample(metrics, series + "refunded\"}") == refunded) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(IntSample(metrics, series + "reserved\"}"), 2 * reserved + next_reserved);
  EXPECT_EQ(IntSample(metrics, series + "refunded\"}"), refunded);
}

// An upstream that cannot be reached never saw the request: its
// reservation goes back (settled to 0), from an HTTP/1.1 and an HTTP/2
// client alike.
TEST_P(TokenBudget, AnUnreachableUpstreamGivesItsReservationBack) {
  TestGateway gateway(Config(Rule(kOpenAi, 100'000)), UnusedPort());
  Client client(gateway.port());
  client.Send(Post("/v1/chat/completions", "a", ChatBody()));
  EXPECT_EQ(client.Read().result_int(), 502);
  TempDir dir;
  const std::string h2 = Shell(CurlChat(dir, ChatBody(), gateway.port(), "1,1"));
  EXPECT_NE(h2.find(" 502"), std::string::npos) << h2;
  const std::string key = "/api/v1/keys?rule=team-tokens&header:X-Team=a";
  json::value view;
  for (int i = 0; i < 400; ++i) {  // a settle comes with the store's answer
    view = json::parse(AdminRequest(gateway.admin_port(), "GET", key).body());
    if (view.at("windows").at(0).at("remaining") == 100'000) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(view.at("windows").at(0).at("remaining"), 100'000) << view;
  EXPECT_EQ(view.at("reserved_in_flight"), 0) << view;
  // Counted once as reserved, and all of it as refunded.
  const std::string metrics = AdminRequest(gateway.admin_port(), "GET", "/metrics").body();
  const std::string series = R"(tollgate_ratelimit_cost_total{rule="team-tokens",phase=")";
  const std::int64_t reserved = 2 * (static_cast<std::int64_t>(ChatBody().size()) + 50);
  EXPECT_EQ(IntSample(metrics, series + "reserved\"}"), reserved) << metrics;
  EXPECT_EQ(IntSample(metrics, series + "refunded\"}"), reserved) << metrics;
}

// The first event reaches the client while the upstream still holds the
// rest (it sends more only when told, after the client has read it).
TEST_P(TokenBudget, AStreamReachesTheClientAsItIsSent) {
  TestGateway gateway(Config(Rule(kOpenAi, 100'000)), llm_.port());
  Client client(gateway.port());
  client.Send(Post("/v1/chat/completions", "a", ChatBody(R"(,"max_tokens":9,"stream":true)"),
                   "X-Test-Wait: 1\r\nX-Test-Usage: 2,2\r\n"));
  http::response_parser<http::string_body> parser;
  boost::system::error_code ec;
  http::read_header(client.socket(), client.buffer(), parser, ec);
  ASSERT_FALSE(ec);
  // What the header's read took of the body first.
  std::string seen(static_cast<const char*>(client.buffer().data().data()),
                   client.buffer().size());
  ASSERT_TRUE(ReadUntil(client, "\n\n", seen));
  EXPECT_NE(seen.find("chat.completion.chunk"), std::string::npos) << seen;
  Client release(llm_.port());
  release.Send("POST /v1/release HTTP/1.1\r\nHost: llm\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(release.Read().result_int(), 200);
  // The rest, to the chunked body's end.
  ASSERT_TRUE(ReadUntil(client, "0\r\n\r\n", seen));
  EXPECT_NE(seen.find("[DONE]"), std::string::npos) << seen;
}

// An HTTP/2 client (curl, prior knowledge): the body is read for its cost,
// rewritten, and the response settles.
TEST_P(TokenBudget, AnHttp2ClientIsChargedAlike) {
  TestGateway gateway(Config(Rule(kOpenAi, 100'000)), llm_.port());
  TempDir dir;
  const std::string body = ChatBody();
  const std::string curl = CurlChat(dir, body, gateway.port(), "4,4");
  const std::string first = Shell(curl);
  EXPECT_NE(first.find("HTTP/2 200"), std::string::npos) << first;
  EXPECT_NE(first.find(R"("max_tokens": 50)"), std::string::npos) << first;
  const std::string second = Shell(curl);
  EXPECT_EQ(RemainingIn(second), 100'000 - 8 - static_cast<std::int64_t>(body.size()) - 50)
      << second;
}

// Leased quotas (sync = "lease") across two gateways on one Redis: each
// takes slices of the team's budget, reserves from its hand and settles
// into it, and together they never spend beyond the budget.
TEST(TokenBudgetLeases, TwoGatewaysNeverSpendBeyondTheBudget) {
  constexpr std::int64_t kBudget = 3000;
  FakeLlm llm;
  RedisServer redis;
  const std::string config =
      BasicConfig(RedisStoreSection("url = \"" + redis.url() + "\"", "deny", "500ms",
                                    "time = \"client\"\n") +
                  Rule(kOpenAi, kBudget) + "sync = \"lease\"\nlease_max = 400\n");
  TestGateway one(config, llm.port());
  TestGateway two(config, llm.port());
  const Spent spent = SpendConcurrently({one.port(), two.port()}, 8);
  EXPECT_GT(spent.refused, 0);
  for (const std::int64_t team : spent.team) {
    EXPECT_LE(team, kBudget);
    // Refunds come back: most of the budget is used, not just reserved.
    EXPECT_GT(team, kBudget / 2);
  }
}

// The access log says what was reserved and settled; the metrics count it.
TEST_P(TokenBudget, TheAccessLogAndTheMetricsShowTheCosts) {
  TempDir dir;
  const std::string log = dir.path() + "/access.log";
  std::string config = Config(Rule(kOpenAi, 100'000));
  config.replace(config.find("access = \"off\""), 14, "access = \"" + log + "\"");
  TestGateway gateway(config, llm_.port());
  Client client(gateway.port());
  const std::string body = ChatBody(R"(,"max_tokens":40)");
  const std::int64_t reserved = static_cast<std::int64_t>(body.size()) + 40;
  client.Send(Post("/v1/chat/completions", "a", body, "X-Test-Usage: 7,5\r\n"));
  ASSERT_EQ(client.Read().result_int(), 200);
  const std::string line = "cost=" + std::to_string(reserved) + "/12";
  std::string logged;
  std::string metrics;
  const std::string series = R"(tollgate_ratelimit_cost_total{rule="team-tokens",phase=")";
  for (int i = 0; i < 1500; ++i) {  // the log flushes every second; a settle may answer later
    logged = ReadFile(log);
    metrics = AdminRequest(gateway.admin_port(), "GET", "/metrics").body();
    if (logged.find(line) != std::string::npos && IntSample(metrics, series + "settled\"}") >= 0) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_NE(logged.find(line), std::string::npos) << logged;
  EXPECT_EQ(IntSample(metrics, series + "reserved\"}"), reserved);
  EXPECT_EQ(IntSample(metrics, series + "settled\"}"), 12);
  EXPECT_EQ(IntSample(metrics, series + "refunded\"}"), reserved - 12);
}

// A cost from the request above what the limit can ever allow is refused
// with the rule's status, a body that says so and no Retry-After.
TEST_P(TokenBudget, ACostBeyondTheCapacityIsRefusedForGood) {
  TestGateway gateway(Config(Rule("cost = { header = \"X-Cost\" }", 100)), llm_.port());
  Client client(gateway.port());
  const std::string body = ChatBody();
  client.Send(Post("/v1/chat/completions", "a", body, "X-Cost: 101\r\nX-Test-Usage: 1,1\r\n"));
  Response res = client.Read();
  EXPECT_EQ(res.result_int(), 429);
  EXPECT_NE(res.body().find(R"("error":"cost_beyond_capacity")"), std::string::npos) << res.body();
  EXPECT_EQ(res.find(http::field::retry_after), res.end());
  // (A refusal before the body is read ends the connection.)
  Client next(gateway.port());
  next.Send(Post("/v1/chat/completions", "a", body, "X-Cost: 100\r\nX-Test-Usage: 1,1\r\n"));
  res = next.Read();
  EXPECT_EQ(res.result_int(), 200) << res.body();
  EXPECT_EQ(Remaining(res), 0);
}

// tokens = "price": the reservation and the settlement in cost units of
// the model's [[prices]] entry (here 1 a prompt token, 2 an output token).
TEST_P(TokenBudget, PricesSettleInCostUnits) {
  TestGateway gateway(Config(Rule(kOpenAi + "\ntokens = \"price\"", 100'000) + R"(
[[prices]]
model = "gpt-4o-*"
input = 1000000
output = 2000000
)"),
                      llm_.port());
  Client client(gateway.port());
  const std::string body = ChatBody(R"(,"max_tokens":40)");
  const std::int64_t reserved = static_cast<std::int64_t>(body.size()) + 2 * 40;
  client.Send(Post("/v1/chat/completions", "a", body, "X-Test-Usage: 7,5\r\n"));
  Response res = client.Read();
  ASSERT_EQ(res.result_int(), 200) << res.body();
  EXPECT_EQ(Remaining(res), 100'000 - reserved);
  client.Send(Post("/v1/chat/completions", "a", body, "X-Test-Usage: 1,1\r\n"));
  res = client.Read();
  EXPECT_EQ(Remaining(res), 100'000 - (7 + 2 * 5) - reserved);
}

// One connection, an exchange with one settling rule, then one with two:
// each settles from its own response (the settlement grows for the second
// without moving what the first set up).
TEST_P(TokenBudget, AConnectionsExchangesSettleAsManyRulesAsTheyMatch) {
  TestGateway gateway(Config(R"(
[[rules]]
name = "all"
key = "header:X-Team"
algorithm = "fixed_window"
window = "1m"
limit = 1000
cost = 100
settle = { json = "usage.total_tokens" }
[[rules]]
name = "two"
match = { path_prefix = "/two/" }
key = "header:X-Team"
algorithm = "fixed_window"
window = "1m"
limit = 1000
cost = 100
settle = { json = "usage.total_tokens" }
headers = "none"
)"),
                      llm_.port());
  Client client(gateway.port());
  client.Send(Post("/v1/chat/completions", "a", ChatBody(), "X-Test-Usage: 2,3\r\n"));
  ASSERT_EQ(client.Read().result_int(), 200);
  client.Send(Post("/two/chat/completions", "a", ChatBody(), "X-Test-Usage: 4,4\r\n"));
  ASSERT_EQ(client.Read().result_int(), 200);
  client.Send(Post("/two/chat/completions", "a", ChatBody(), "X-Test-Usage: 1,1\r\n"));
  const Response third = client.Read();
  ASSERT_EQ(third.result_int(), 200);
  // "all": 5 and 8 settled, 100 reserved now.
  EXPECT_EQ(Remaining(third), 1000 - 5 - 8 - 100);
  const Response two = AdminRequest(gateway.admin_port(), "GET", "/api/v1/keys?rule=two&header:X-Team=a");
  EXPECT_EQ(json::parse(two.body()).at("windows").at(0).at("remaining"), 1000 - 8 - 2) << two.body();
}

// A budget per team and model (key = ["header:X-Team", "json:model"]):
// one model's spent budget leaves the other's whole; a request without a
// model is not under the rule.
TEST_P(TokenBudget, ABudgetPerModel) {
  const std::string a = ChatBody(R"(,"max_tokens":10)");
  std::string b = a;
  b.replace(b.find("gpt-4o-mini"), 11, "gpt-4o-maxi");
  const std::int64_t reserved = static_cast<std::int64_t>(a.size()) + 10;
  TestGateway gateway(Config(R"(
[[rules]]
name = "team-model"
key = ["header:X-Team", "json:model"]
algorithm = "fixed_window"
window = "1m"
limit = )" + std::to_string(reserved) + "\n" + kOpenAi + "\n"),
                      llm_.port());
  Client client(gateway.port());
  const std::string usage = "X-Test-Usage: " + std::to_string(reserved - 10) + ",10\r\n";
  client.Send(Post("/v1/chat/completions", "t", a, usage));
  Response res = client.Read();
  ASSERT_EQ(res.result_int(), 200) << res.body();
  client.Send(Post("/v1/chat/completions", "t", a, usage));
  res = client.Read();
  EXPECT_EQ(res.result_int(), 429) << res.body();
  client.Send(Post("/v1/chat/completions", "t", b, usage));
  res = client.Read();
  EXPECT_EQ(res.result_int(), 200) << res.body();
  EXPECT_EQ(Remaining(res), 0);
  client.Send(Post("/v1/chat/completions", "t", R"({"messages":[],"max_tokens":10})", usage));
  res = client.Read();
  EXPECT_EQ(res.result_int(), 200) << res.body();
  EXPECT_EQ(res.find("RateLimit"), res.end());
  // The admin API names the key by its parts, the model's included.
  const Response view = AdminRequest(gateway.admin_port(), "GET",
                                     "/api/v1/keys?rule=team-model&header:X-Team=t&json:model=gpt-4o-mini");
  ASSERT_EQ(view.result_int(), 200) << view.body();
  EXPECT_NE(view.body().find("json:model=gpt-4o-mini"), std::string::npos) << view.body();
  EXPECT_EQ(json::parse(view.body()).at("windows").at(0).at("remaining"), 0) << view.body();
}

// An HTTP/2 upstream (upstream_peer.py's llm: an OpenAI-shaped answer)
// from an HTTP/1.1 client and from an HTTP/2 one: the body rewritten with
// the output bound, forwarded with its new length, and settled.
TEST_P(TokenBudget, AnHttp2UpstreamSettlesAlike) {
  PortPeer peer({"/usr/bin/python3", std::string(TOLLGATE_HTTP2_SCRIPTS) + "/upstream_peer.py",
                 "llm", "{STATS}"});
  std::string config = Config(Rule(kOpenAi, 100'000));
  config.replace(config.find("[[routes]]"), 0, "protocol = \"h2c\"\n");
  TestGateway gateway(config, peer.port());
  Client client(gateway.port());
  const std::string bare = ChatBody();
  client.Send(Post("/v1/chat/completions", "a", bare, "X-Test-Usage: 6,3\r\n"));
  const Response first = client.Read();
  ASSERT_EQ(first.result_int(), 200) << first.body();
  const json::value seen = json::parse(first.body()).at("seen");
  EXPECT_EQ(seen.at("max_tokens"), 50) << first.body();
  EXPECT_GT(seen.at("bytes").as_int64(), static_cast<std::int64_t>(bare.size()));
  const std::int64_t reserved = static_cast<std::int64_t>(bare.size()) + 50;
  EXPECT_EQ(Remaining(first), 100'000 - reserved);
  // An HTTP/2 client next: the first request settled to its 9 tokens.
  TempDir dir;
  const std::string curl = CurlChat(dir, bare, gateway.port(), "1,1");
  const std::string second = Shell(curl);
  EXPECT_EQ(RemainingIn(second), 100'000 - 9 - reserved) << second;
  const std::string third = Shell(curl);
  EXPECT_EQ(RemainingIn(third), 100'000 - 9 - 2 - reserved) << third;
}

// reserve = "estimate" reserves a quarter of the prompt's bytes: more
// requests run at once, and what they spend may pass the budget, by at
// most the fixed window's debt (its count stops at twice the limit).
TEST_P(TokenBudget, EstimatesPassTheBudgetByTheDebtRuleAtMost) {
  constexpr std::int64_t kBudget = 3000;
  TestGateway gateway(Config(Rule(kOpenAi + "\nreserve = \"estimate\"", kBudget)), llm_.port());
  const Spent spent = SpendConcurrently({gateway.port()}, 8);
  EXPECT_GT(spent.refused, 0);
  for (const std::int64_t team : spent.team) {
    EXPECT_LE(team, 2 * kBudget);
    EXPECT_GT(team, kBudget / 2);
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, TokenBudget, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Redis" : "Local";
                         });

}  // namespace
}  // namespace tollgate::testing
