#include "store/redis_coordinator.h"

#include <fmt/format.h>
#include <openssl/rand.h>

#include <chrono>
#include <string_view>

namespace tollgate::store {
namespace {

constexpr std::string_view kUpstreamTag = "upstream/";

// The keys of the learned-limit scripts (learned_check.lua, learned_learn.lua).
struct LearnedKeys {
  LearnedKeys(std::string_view prefix, std::string_view upstream, std::string_view bucket) {
    std::string tag(kUpstreamTag);
    tag += upstream;
    global = RedisTaggedKey(prefix, tag, "", "global");
    remaining = RedisTaggedKey(prefix, tag, bucket, "remaining");
    limit = RedisTaggedKey(prefix, tag, bucket, "limit");
  }
  std::string global, remaining, limit;
};

std::string Int(std::int64_t v) { return std::to_string(v); }

// A delay from now as a Unix time in ms (-1 stays "not said"): the learn
// script compares it with Redis TIME (learned_learn.lua).
std::int64_t At(std::int64_t delay_ms) {
  if (delay_ms < 0) return -1;
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
             .count() +
         delay_ms;
}

}  // namespace

// Gives places back with the release scripts. A guard's lease names what it
// holds: a lease id (an in-flight place) or empty (a waiting-line ticket).
struct RedisCoordinator::Keeper final : PlaceKeeper {
  explicit Keeper(RedisStore& r) : redis(r) {}
  void GiveBack(const std::string& key, const std::string& lease) override {
    if (lease.empty()) {
      redis.Run(RedisAux::kQueueLeave, {key}, {}, nullptr);
    } else {
      redis.Run(RedisAux::kInflightRelease, {key}, {lease}, nullptr);
    }
  }
  RedisStore& redis;
};

// Waits for an acquiring script's answer and hands the guard over with it.
class RedisCoordinator::Holder final : public CountSink {
 public:
  Holder(std::weak_ptr<PlaceKeeper> keeper, std::string key, std::string lease,
         InflightGuard& target, CountSink& sink, bool granted_on_any)
      : keeper_(std::move(keeper)),
        key_(std::move(key)),
        lease_(std::move(lease)),
        target_(target),
        sink_(sink),
        granted_on_any_(granted_on_any) {}
  void OnCount(const CountResult& result) override {
    // Owned by the pending call: deleted once answered.
    std::unique_ptr<Holder> self(this);
    const bool granted =
        result.status == StoreStatus::kOk && (granted_on_any_ || result.value == 1);
    if (granted) target_ = InflightGuard(std::move(keeper_), std::move(key_), std::move(lease_));
    sink_.OnCount(result);  // may destroy target_'s owner: nothing after it
  }

 private:
  std::weak_ptr<PlaceKeeper> keeper_;
  std::string key_;
  std::string lease_;
  InflightGuard& target_;
  CountSink& sink_;
  bool granted_on_any_;  // a ticket is held whatever the count
};

RedisCoordinator::RedisCoordinator(RedisStore& redis)
    : redis_(redis), keeper_(std::make_shared<Keeper>(redis)) {
  unsigned char id[8] = {};
  RAND_bytes(id, sizeof id);
  for (unsigned char b : id) lease_prefix_ += fmt::format("{:02x}", b);
  lease_prefix_ += ':';
}

RedisCoordinator::~RedisCoordinator() = default;

void RedisCoordinator::CheckLearned(std::string_view upstream, std::string_view bucket,
                                    std::int64_t, CountSink& sink) {
  const LearnedKeys k(redis_.options().prefix, upstream, bucket);
  redis_.Run(RedisAux::kLearnedCheck, {k.global, k.remaining, k.limit}, {}, &sink);
}

void RedisCoordinator::Learn(std::string_view upstream, std::string_view bucket,
                             const algorithms::LearnedFacts& facts, std::int64_t) {
  const LearnedKeys k(redis_.options().prefix, upstream, bucket);
  redis_.Run(RedisAux::kLearnedLearn, {k.global, k.remaining, k.limit},
             {Int(facts.limit), Int(At(facts.reset_after_ms)), Int(At(facts.retry_after_ms)),
              facts.limited ? "1" : "0", facts.global ? "1" : "0"},
             nullptr);
}

void RedisCoordinator::AcquirePlace(std::string_view key, std::int64_t max, std::int64_t now_ms,
                                    InflightGuard& place, CountSink& sink) {
  const RedisOptions& o = redis_.options();
  std::string redis_key = RedisTaggedKey(o.prefix, key, "", "inflight");
  std::string lease = lease_prefix_ + std::to_string(++next_lease_);
  const std::string now = o.time == RedisTime::kServer ? std::string() : Int(now_ms);
  auto* holder = new Holder(keeper_, redis_key, lease, place, sink, false);
  redis_.Run(RedisAux::kInflightAcquire, {redis_key},
             {now, Int(max), Int(o.inflight_ttl_ms), lease}, holder);
}

void RedisCoordinator::EnterQueue(std::string_view key, std::int64_t ttl_ms, InflightGuard& ticket,
                                  CountSink& sink) {
  const RedisOptions& o = redis_.options();
  std::string redis_key = RedisTaggedKey(o.prefix, key, "", "enqueued");
  auto* holder = new Holder(keeper_, redis_key, {}, ticket, sink, true);
  redis_.Run(RedisAux::kQueueEnter, {redis_key}, {Int(std::max<std::int64_t>(ttl_ms, 1))}, holder);
}

}  // namespace tollgate::store
