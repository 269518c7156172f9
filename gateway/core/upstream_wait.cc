#include "gateway/core/upstream_wait.h"

#include <functional>
#include <memory>
#include <string_view>

#include "gateway/core/exchange.h"
#include "gateway/core/fair_places.h"
#include "gateway/core/timer_waiter.h"
#include "gateway/io/net.h"
#include "gateway/telemetry/thread_metrics.h"
#include "rules/config.h"
#include "rules/identity.h"

namespace tollgate::gateway {

using UpstreamWaiter = TimerWaiter<FairPlaces::Waiter>;

std::uint64_t FlowOf(const rules::Identity& identity) {
  // The client: its user, else its address (or what a trusted proxy named
  // it when that is no address).
  if (!identity.user.empty()) return std::hash<std::string_view>{}(identity.user);
  if (!identity.unidentified_client.empty()) {
    return std::hash<std::string_view>{}(identity.unidentified_client);
  }
  const auto& b = identity.client_ip.bytes;
  return std::hash<std::string_view>{}(
      std::string_view(reinterpret_cast<const char*>(b.data()), b.size()));
}

Task<bool> WaitForUpstreamPlace(FairPlaces& places, const rules::UpstreamConfig& upstream,
                                std::int64_t max, std::size_t max_waiting,
                                const WaitClass& wait_class, ThreadMetrics* metrics, Exchange& ex) {
  if (upstream.max_connections_delay_ms <= 0) co_return false;
  const Executor executor = co_await asio::this_coro::executor;
  const auto waiter = std::make_shared<UpstreamWaiter>(executor);
  waiter->Classify(wait_class);
  const FairQueueParams params{.max_per_flow = max_waiting, .max_total = max_waiting};
  // Counts the request in tollgate_delayed_requests while it waits.
  const GaugeScope gauge(metrics, &ThreadMetrics::AddDelayed);
  waiter->timer.expires_after(Ms(upstream.max_connections_delay_ms));
  if (places.Enqueue(upstream.name, max, *waiter, params) != FairQueue::Pushed::kQueued) {
    co_return false;
  }
  // Out of the queue on every path, also when the coroutine is destroyed
  // while it waits (shutdown): a queued waiter must not outlive its place.
  struct Leaving {
    FairPlaces& places;
    UpstreamWaiter& waiter;
    ~Leaving() { places.Leave(waiter); }
  } leaving{places, *waiter};
  // Woken by its turn (the timer cancelled), or the deadline passed.
  co_await waiter->timer.async_wait(kUseTuple);
  places.Leave(*waiter);
  if (!waiter->place) co_return false;
  ex.upstream_place = std::move(waiter->place);
  co_return true;
}

}  // namespace tollgate::gateway
