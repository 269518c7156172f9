// What the request pipeline uses of the worker thread it runs on: the loop
// its waits run on, the rate-limit store, the coordinator (learned limits,
// in-flight places, waiting lines) and the thread's metrics. The core takes
// these, not the Worker, so that it can run on fakes (tests) and does not
// depend on what serves connections. Not owned; the worker keeps them current
// (its store and coordinator are set before it serves) and they outlive
// every request. Worker thread only.
#pragma once

#include "gateway/io/io_types.h"

namespace tollgate::store {
class Store;
class Coordinator;
}  // namespace tollgate::store

namespace tollgate::gateway {

class SettlementPool;
class ThreadMetrics;

struct CoreServices {
  Executor executor;
  store::Store* store = nullptr;
  store::Coordinator* coordinator = nullptr;
  ThreadMetrics* metrics = nullptr;  // null when metrics are off
  // The thread's spare settlements (settlement.h); null: each connection
  // makes its own.
  SettlementPool* settlements = nullptr;
};

}  // namespace tollgate::gateway
