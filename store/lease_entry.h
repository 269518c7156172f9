// What LeasingStore (leasing_store.h) keeps per limit (Spec) and per key
// (Entry: its hand of leases, the requests waiting for a take, its place
// in the due queue). Include only from leasing_store.cc. Not thread-safe,
// as the store.
#pragma once

#include <boost/container/small_vector.hpp>
#include <cstdint>
#include <string>

#include "store/leasing_store.h"

namespace tollgate::store {

// A limit as the leases of its keys saw it: copied, since a reload may
// free the rule's LimitSpec while its leases are still out.
struct LeasingStore::Spec {
  LimitSpec limit;
  LeaseStats::Rule* stats;
  // A bucket lease holds refill back in Redis until it returns: given back
  // even when spent (see docs/leases.md).
  LeaseRefill refill = LeaseRefill::kFree;
  LeaseStamps stamps = LeaseStamps::kNone;
  std::size_t entries = 0;  // keys tracked under it
};

struct LeasingStore::Waiter {
  DecisionSink* sink;
  std::int64_t cost;
  std::uint32_t partition;
};

struct LeasingStore::Entry final : ValuesSink, LeaseHand::Releases {
  Entry(std::int64_t now, const Spec& spec)
      : hand(now, spec.limit.lease->ttl_ms, spec.refill, spec.stamps) {}
  LeasingStore* store = nullptr;
  Spec* spec = nullptr;
  std::string key;       // the rule key (entries_'s key views it)
  std::size_t hash = 0;  // IdView::Of(fingerprint, key).hash
  LeaseHand hand;
  // Requests waiting for a take, in order; inline for one (a cold key's).
  using Waiters = boost::container::small_vector<Waiter, 1>;
  Waiters waiters;
  std::uint32_t dues = 0;  // its items in the due queues: not erased before 0
  bool taking = false;
  bool take_spent = false;  // the take in flight is the front waiter's, spent at once
  std::int64_t take_sent = 0;
  std::int64_t takes_fail_until = 0;  // a take failed: the policy answers until then

  void OnValues(const ValuesResult& result) override { store->OnTake(*this, result); }
  void OnRelease(const LeaseHand::Held& held, LeaseEnd end, std::int64_t now) override {
    store->GiveBack(*this, held, end, now);
  }
};

}  // namespace tollgate::store
