// Metrics::Render's text for every tollgate_* family, with label values
// that need escaping, both stores, leases and a fleet, against
// metrics_render.golden: what Prometheus servers, dashboards and alert
// rules read stays byte for byte the same (process_* lines vary and are
// left out).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "gateway/telemetry/metrics.h"

namespace tollgate::gateway {
namespace {

TEST(MetricsRender, EveryFamilyAsTheGoldenText) {
  std::string rendered;
  Metrics m(2, "1.2.3\"x");
  const int r0 = m.RouteId("api"), r1 = m.RouteId("_unrouted"), r2 = m.RouteId("we\\ird\nname");
  const int u0 = m.UpstreamId("up"), u1 = m.UpstreamId("down");
  const int l0 = m.ListenerId("127.0.0.1:8080"), l1 = m.ListenerId("[::1]:443");
  const int k0 = m.RuleId("per-ip"), k1 = m.RuleId("two \"per\" minute");
  ThreadMetrics& a = m.thread(0);
  ThreadMetrics& b = m.thread(1);
  a.RecordRequest(r0, 200, 0.0002);
  a.RecordRequest(r0, 429, 0.003);
  b.RecordRequest(r0, 200, 1.5);
  b.RecordRequest(r1, 404, 12);
  a.RecordRequest(r2, 502, 0.05);
  a.RecordDecision(k0, DecisionKind::kAllowed);
  b.RecordDecision(k0, DecisionKind::kLimited);
  a.RecordDecision(k1, DecisionKind::kError);
  a.RecordCost(k1, CostPhase::kReserved, 300);
  b.RecordCost(k1, CostPhase::kSettled, 120);
  b.RecordCost(k1, CostPhase::kRefunded, 180);
  a.RecordUpstream(u0, 0.01);
  b.RecordUpstream(u1, 3);
  a.RecordUpstreamFailure(u1, UpstreamFailure::kTimeout);
  a.RecordStore(StoreKindLabel::kRedis, 0.0007);
  b.RecordStore(StoreKindLabel::kRedis, 0.2);
  a.RecordStoreError(StoreKindLabel::kRedis, StoreErrorKind::kUnavailable);
  a.RecordFallback(static_cast<rules::StoreFailurePolicy>(2));
  a.AddConnections(l0, 3);
  b.AddConnections(l1, 1);
  a.RecordTlsHandshake(l1, static_cast<HandshakeResult>(0));
  a.RecordTlsHandshake(l1, static_cast<HandshakeResult>(2));
  b.RecordTlsHandshakeFailure(l1, static_cast<HandshakeFailure>(5));
  a.AddDelayed(2);
  b.AddDelayed(-1);
  a.AddWebSockets(r0, 1);
  a.AddWebSocketBytes(r0, TunnelDirection::kIn, 100);
  b.AddWebSocketBytes(r0, TunnelDirection::kOut, 7);
  a.AddHttp2Streams(4);
  a.RecordGrpcResponse(r0, 0);
  a.RecordGrpcResponse(r0, 99);
  a.RecordGrpcResponse(r2, 14);
  a.RecordDecisionRequest(DecisionProtocol::kRls);
  m.RecordReload(true, 1733111111.25);
  m.RecordReload(false, 1733111112.5, "bad");
  m.ConfigInForce(1733111111.25);
  m.RecordAdminChange(AdminChange::kBlock);
  m.RecordAdminChange(AdminChange::kOverrideRemoved);
  for (int redis = 0; redis < 2; ++redis) {
    ExternalGauges e;
    e.local_store_keys = 42;
    e.local_store_rule_evictions = {{k0, 5}, {k1, 0}};
    e.upstream_concurrency = {{"up", true, 12, 5, 20'000}, {"down", false, 3, 0, 0}};
    e.redis = redis == 1;
    e.redis_circuits_open = redis;
    if (redis) {
      store::LeaseStats::Counts c;
      c.rule = "leased";
      c.requests = {3, 1, 0};
      c.units = {30, 20, 5};
      c.in_hand = 5;
      e.leases.push_back(c);
      e.cluster_gateways = 3;
    }
    e.certificate_expiry = {{"/etc/x.pem", 1800000000}};
    e.redis_batched_decisions = 9;
    std::istringstream text(m.Render(e));
    for (std::string line; std::getline(text, line);) {
      if (line.find("process_") == std::string::npos) rendered += line + "\n";
    }
  }
  std::ifstream in(TOLLGATE_GOLDEN);
  std::stringstream golden;
  golden << in.rdbuf();
  ASSERT_FALSE(golden.str().empty()) << TOLLGATE_GOLDEN;
  EXPECT_EQ(rendered, golden.str());
}

}  // namespace
}  // namespace tollgate::gateway
