// The exchange driver (gateway/core/exchange_driver.h) on an in-memory
// downstream and upstream: no socket, the manual clock, admit's waits held by
// the fake (which moves the clock instead of sleeping). Every outcome of an
// exchange: admitted and forwarded, refused by a rule, delayed then
// admitted, client gone while waiting, upstream refused / timed out / reset,
// body too large, malformed and unrouted requests, the check endpoint; and
// each is logged exactly once.
#include "gateway/core/exchange_driver.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gateway/core/upstream_call.h"
#include "gateway/core/waiting_room.h"
#include "rules/config.h"
#include "store/coordinator.h"
#include "store/local_store.h"
#include "tests/gateway/test_support.h"

namespace tollgate::gateway {
namespace {

// What the fake upstream does with a forwarded request.
enum class Upstream { kAnswers, kRefuses, kTimesOut, kResets };

// The services, state and clock the driver runs on, built from a TOML text
// as the server builds them.
class DriverWorld {
 public:
  // `extra` appended to testing::BasicConfig, whose one route has `prefix`.
  explicit DriverWorld(const std::string& extra, const std::string& prefix = "/") {
    std::string toml = testing::BasicConfig(extra);
    toml.replace(toml.find("path_prefix = \"/\""), 17, "path_prefix = \"" + prefix + "\"");
    loaded_ = rules::LoadConfigText(testing::WithEchoPort(toml, 9), "t.toml");
    if (!loaded_.config) {
      ADD_FAILURE() << loaded_.errors[0].ToString();
      return;
    }
    auto config = std::make_shared<const rules::Config>(*loaded_.config);
    state_.config = config;
    state_.clock = &clock_;
    state_.waiting_room = &room_;
    state_.routes = std::make_unique<rules::RouteTable>(config->routes);
    std::string error;
    state_.identity = rules::IdentityResolver::Create(config->identity, clock_, error);
    std::vector<store::PartitionShare> shares;
    std::vector<std::size_t> sharing;
    for (std::size_t i = 0; i < config->rules.size(); ++i) {
      if (config->rules[i].limit != nullptr) {
        sharing.push_back(i);
        shares.push_back({config->rules[i].name, 1000});
      }
    }
    const std::vector<std::uint32_t> assigned = store_.AssignPartitions(shares);
    std::vector<std::uint32_t> partitions(config->rules.size(), 0);
    for (std::size_t s = 0; s < sharing.size(); ++s) partitions[sharing[s]] = assigned[s];
    state_.rule_set = std::make_unique<rules::RuleSet>(config->rules, std::move(partitions));
  }

  const GatewayState& state() const { return state_; }
  const CoreServices& services() const { return services_; }
  store::ManualClock& clock() { return clock_; }
  asio::io_context& io() { return io_; }

 private:
  rules::LoadResult loaded_;
  store::ManualClock clock_{1'000'000};
  store::LocalStore store_;
  store::LocalCoordinator coordinator_;
  WaitingRoom room_{1000};
  asio::io_context io_;
  CoreServices services_{io_.get_executor(), &store_, &coordinator_, nullptr};
  GatewayState state_;
};

// A downstream whose request is given whole and whose answers are recorded.
class FakeDown final : private ClientWatch {
 public:
  explicit FakeDown(DriverWorld& world) : world_(world), admission_(world.services()) {}

  // The client's request: `target` with `fields` ("Name: value" each).
  void Request(std::string target, std::vector<std::pair<std::string, std::string>> fields = {}) {
    request_ = {};
    request_.method(http::verb::get);
    request_.target(target);
    request_.version(11);
    request_.set(http::field::host, "example.test");
    for (const auto& [name, value] : fields) request_.set(name, value);
  }

  // One exchange through the driver; what the connection would do next.
  bool Run() {
    std::optional<bool> keep;
    asio::co_spawn(world_.io(), ExchangeDriver<FakeDown>::Run(*this),
                   [&](std::exception_ptr e, bool k) {
                     if (e) std::rethrow_exception(e);
                     keep = k;
                   });
    world_.io().restart();
    world_.io().run();
    EXPECT_TRUE(keep.has_value());
    return keep.value_or(false);
  }

  // Set before Run().
  HeadRead head_outcome = HeadRead::kRead;
  Refusal head_refusal = Refusal::kBadRequest;
  bool check_endpoint = false;
  bool declared_too_large = false;
  Upstream upstream = Upstream::kAnswers;
  bool client_leaves_while_held = false;

  // What happened.
  std::vector<unsigned> replies;  // statuses of tollgate's own answers
  int forwarded = 0;
  int checks_allowed = 0;
  int logged = 0;
  std::int64_t held_ms = 0;
  const Exchange& ex() const { return ex_; }
  const Answer& last_answer() const { return answer_; }

 private:
  friend class ExchangeDriver<FakeDown>;
  const GatewayState& BeginExchange() const { return world_.state(); }
  Exchange& exchange() { return ex_; }
  Answer& answer() { return answer_; }
  Admission& admission() { return admission_; }
  ClientWatch& watch() { return *this; }
  static ThreadMetrics* metrics() { return nullptr; }
  std::string& canonical() { return canonical_; }
  static std::string_view peer_ip() { return "192.0.2.7"; }
  const rules::IpAddress& peer_address() const { return peer_; }
  static const rules::ClientCertificate* client_cert() { return nullptr; }
  http::request_header<Fields>& request() { return request_; }
  HeadRead TakeHead(Refusal& refusal) {
    refusal = head_refusal;
    return head_outcome == HeadRead::kRead ? HeadRead::kRead : HeadRead::kNeedMore;
  }
  Task<HeadRead> ReadHead(Refusal& refusal) {
    refusal = head_refusal;
    co_return head_outcome;
  }
  static void OnHead(const GatewayState&, Exchange& ex) { ex.version = 11; }
  RequestHeaderCheck CheckHead() { return CheckRequestHeader(request_, false); }
  static void CloseAfterMalformed(Exchange& ex) { ex.close = true; }
  bool IsCheckEndpoint() const { return check_endpoint; }
  bool BodyDeclaredTooLarge() const { return declared_too_large; }
  static void RefusedWithBodyUnread(Exchange&) {}
  static void SkipBody(Exchange&) {}
  static bool UpgradeRefused(const rules::RouteConfig&) { return false; }
  bool StartReply() {
    NoteAnswer(answer_, 0, ex_);
    replies.push_back(answer_.Status());
    return true;
  }
  static Task<void> FinishReply() { co_return; }
  Task<void> WriteCheckAllowed() {
    ++checks_allowed;
    ex_.status = 200;
    co_return;
  }
  static bool StartForward(const rules::RouteConfig&) { return true; }
  static bool ReadsBeforeUpstream() { return false; }
  static Task<bool> ReadBeforeUpstream() { co_return true; }
  static Task<bool> ReadBodyForCost() { co_return true; }
  static std::string_view BodyForCost() { return {}; }
  static void ReplaceBody(std::string) {}
  std::string_view UpstreamTarget() { return request_.target(); }
  static void RefusedBeforeUpstream(Exchange&) {}
  // The fake upstream: an answer, or a failure answered as the forward
  // paths answer it (UpstreamFailed).
  Task<void> ExchangeWithUpstream(const rules::RouteConfig&, const rules::UpstreamConfig&) {
    ++forwarded;
    switch (upstream) {
      case Upstream::kAnswers:
        ex_.status = 200;
        co_return;
      case Upstream::kRefuses:
        answer_ = Refuse(UpstreamFailed(ex_, ConnectFailure::kRefused, {}, nullptr));
        break;
      case Upstream::kTimesOut:
        answer_ =
            Refuse(UpstreamFailed(ex_, ConnectFailure::kNone, beast::error::timeout, nullptr));
        break;
      case Upstream::kResets:
        answer_ = Refuse(
            UpstreamFailed(ex_, ConnectFailure::kNone, asio::error::connection_reset, nullptr));
        break;
    }
    StartReply();
  }
  void EndExchange(Exchange&) { ++logged; }
  static bool KeepsConnection(const Exchange& ex) { return !ex.close; }
  // Admit's waits: the clock moves by the wait, unless the client leaves.
  Task<Held> Hold(Timer& timer) override {
    if (client_leaves_while_held) co_return Held::kClientGone;
    const auto wait =
        std::chrono::ceil<std::chrono::milliseconds>(timer.expiry() - Timer::clock_type::now());
    held_ms += wait.count();
    world_.clock().Advance(wait.count());
    co_return Held::kElapsed;
  }

  DriverWorld& world_;
  Admission admission_;
  Exchange ex_;
  Answer answer_;
  std::string canonical_;
  http::request_header<Fields> request_;
  rules::IpAddress peer_ = rules::IpAddress::Parse("192.0.2.7").value();
};

constexpr const char* kOnePerMinute = R"(
[[rules]]
name = "per-ip"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1m"
)";

constexpr const char* kDelayed = R"(
[[rules]]
name = "queue"
key = "ip"
algorithm = "fixed_window"
limit = 1
window = "1s"
action = "delay"
max_delay = "5s"
)";

TEST(ExchangeDriver, AdmittedRequestIsForwardedAndLoggedOnce) {
  DriverWorld world("");
  FakeDown down(world);
  down.Request("/hello");
  EXPECT_TRUE(down.Run());
  EXPECT_EQ(down.forwarded, 1);
  EXPECT_TRUE(down.replies.empty());
  EXPECT_EQ(down.ex().status, 200u);
  EXPECT_FALSE(down.ex().route.empty());
  EXPECT_FALSE(down.ex().request_id.empty());
  EXPECT_EQ(down.logged, 1);
}

TEST(ExchangeDriver, RuleRefusesTheSecondRequest) {
  DriverWorld world(kOnePerMinute);
  FakeDown down(world);
  down.Request("/");
  EXPECT_TRUE(down.Run());
  down.Request("/");
  EXPECT_TRUE(down.Run());
  EXPECT_EQ(down.forwarded, 1);
  ASSERT_EQ(down.replies.size(), 1u);
  EXPECT_EQ(down.replies[0], 429u);
  EXPECT_EQ(down.last_answer().refusal, Refusal::kRateLimited);
  EXPECT_EQ(down.logged, 2);
}

TEST(ExchangeDriver, DelayedRequestIsHeldThenAdmitted) {
  DriverWorld world(kDelayed);
  FakeDown down(world);
  down.Request("/");
  down.Run();
  down.Request("/");
  down.Run();
  EXPECT_EQ(down.forwarded, 2);
  EXPECT_TRUE(down.replies.empty());
  EXPECT_GT(down.held_ms, 0);
  EXPECT_LE(down.held_ms, 1000);
  EXPECT_EQ(down.logged, 2);
}

TEST(ExchangeDriver, ClientGoneWhileHeldGetsNoAnswer) {
  DriverWorld world(kDelayed);
  FakeDown down(world);
  down.Request("/");
  down.Run();
  down.client_leaves_while_held = true;
  down.Request("/");
  down.Run();
  EXPECT_EQ(down.forwarded, 1);
  EXPECT_TRUE(down.replies.empty());
  EXPECT_EQ(down.logged, 2);  // the request that left is logged too
}

TEST(ExchangeDriver, UpstreamFailuresAre502Or504) {
  DriverWorld world("");
  FakeDown down(world);
  for (const auto& [upstream, status] :
       {std::pair{Upstream::kRefuses, 502u}, std::pair{Upstream::kTimesOut, 504u},
        std::pair{Upstream::kResets, 502u}}) {
    down.upstream = upstream;
    down.Request("/");
    down.Run();
    ASSERT_FALSE(down.replies.empty());
    EXPECT_EQ(down.replies.back(), status);
  }
  EXPECT_EQ(down.logged, 3);
}

TEST(ExchangeDriver, BodyTooLargeIs413WithoutForwarding) {
  DriverWorld world("");
  FakeDown down(world);
  down.declared_too_large = true;
  down.Request("/");
  down.Run();
  EXPECT_EQ(down.forwarded, 0);
  ASSERT_EQ(down.replies.size(), 1u);
  EXPECT_EQ(down.replies[0], 413u);
  EXPECT_EQ(down.logged, 1);
}

TEST(ExchangeDriver, HeadRefusedByTheProtocolIsAnsweredAndLogged) {
  DriverWorld world("");
  FakeDown down(world);
  down.head_outcome = HeadRead::kRefused;
  down.head_refusal = Refusal::kHeaderTooLarge;
  down.Request("/");
  down.Run();
  ASSERT_EQ(down.replies.size(), 1u);
  EXPECT_EQ(down.replies[0], 431u);
  EXPECT_EQ(down.logged, 1);
}

TEST(ExchangeDriver, ClientGoneBeforeTheHeadIsNotLogged) {
  DriverWorld world("");
  FakeDown down(world);
  down.head_outcome = HeadRead::kClientGone;
  down.Request("/");
  EXPECT_FALSE(down.Run());
  EXPECT_TRUE(down.replies.empty());
  EXPECT_EQ(down.logged, 0);
}

TEST(ExchangeDriver, MalformedHeadIs400AndEndsTheConnection) {
  DriverWorld world("");
  FakeDown down(world);
  down.Request("/", {{"Host", "bad host"}});
  EXPECT_FALSE(down.Run());
  ASSERT_EQ(down.replies.size(), 1u);
  EXPECT_EQ(down.replies[0], 400u);
  EXPECT_EQ(down.forwarded, 0);
}

TEST(ExchangeDriver, UnroutedRequestIs404) {
  DriverWorld world("", "/api/");
  FakeDown down(world);
  down.Request("/elsewhere");
  down.Run();
  ASSERT_FALSE(down.replies.empty());
  EXPECT_EQ(down.replies.back(), 404u);
}

TEST(ExchangeDriver, CheckEndpointAnswersForTheDescribedRequest) {
  // The check endpoint is the decision listener's: a configuration with one.
  DriverWorld world(std::string(kOnePerMinute) + "[decision]\naddress = \"127.0.0.1:0\"\n");
  FakeDown down(world);
  down.check_endpoint = true;
  down.Request("/check", {{"X-Original-URI", "/api/items"}});
  down.Run();
  EXPECT_EQ(down.checks_allowed, 1);
  EXPECT_EQ(down.ex().target, "");  // the access log is off
  down.Request("/check", {{"X-Original-URI", "/api/items"}});
  down.Run();
  EXPECT_EQ(down.checks_allowed, 1);
  ASSERT_EQ(down.replies.size(), 1u);
  EXPECT_EQ(down.replies[0], 429u);
  down.Request("/check");  // describes nothing
  down.Run();
  EXPECT_EQ(down.replies.back(), 400u);
  EXPECT_EQ(down.forwarded, 0);
  EXPECT_EQ(down.logged, 3);
}

}  // namespace
}  // namespace tollgate::gateway
