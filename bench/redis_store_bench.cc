// Decisions per second of one RedisStore connection keeping `depth`
// decisions in flight (pipelined), with a token bucket on `keys` keys taken
// in turn (k000000000000, k000000000001, ...), at most `batch` decisions per
// script call (RedisOptions::batch; 1: a call each); and the
// exact EVALSHA command it sends, with redis-benchmark's __rand_int__ in
// place of the key's number, so that `redis-benchmark -r KEYS` can run the
// same script on the same keys with the same pipelining
// (bench/redis_store.sh).
// Usage: redis_store_bench PORT DEPTH DECISIONS KEYS BATCH -> "decisions_per_s"
//        redis_store_bench --command                  -> the EVALSHA arguments
#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "store/redis_store.h"

namespace {

using namespace tollgate;

store::LimitSpec HotLimit() {
  algorithms::LimitParams p;
  p.algorithm = algorithms::Algorithm::kTokenBucket;
  p.limit = 1'000'000'000;
  p.window_ms = 1000;
  p.burst = 1'000'000'000;
  return store::LimitSpec::Make({p});
}

std::string Key(const std::string& number) { return "k" + number; }

struct Driver final : store::DecisionSink {
  store::Store* store = nullptr;
  const store::LimitSpec* limit = nullptr;
  std::vector<std::string> keys;
  std::size_t next_key = 0;
  long left = 0;
  long completed = 0;
  long failed = 0;
  void Next() {
    if (left-- <= 0) return;
    const std::string& key = keys[next_key];
    next_key = (next_key + 1) % keys.size();
    store->Decide({key, limit, 1, 0}, *this);
  }
  void OnDecision(const store::StoreResult& r) override {
    ++completed;
    if (r.status != store::StoreStatus::kOk) ++failed;
    Next();
  }
};

}  // namespace

int main(int argc, char** argv) {
  const store::LimitSpec limit = HotLimit();
  if (argc == 2 && std::string(argv[1]) == "--command") {
    // The decisions' EVALSHA, space-separated ("" = server time).
    std::printf("%s\n", store::RedisDecisionCommand(limit, "tollgate:", Key("__rand_int__"), 1,
                                                    std::nullopt, 0)
                            .c_str());
    return 0;
  }
  if (argc != 6 || std::atoi(argv[4]) < 1 || std::atoi(argv[5]) < 1) {
    std::fprintf(stderr, "usage: redis_store_bench PORT DEPTH DECISIONS KEYS BATCH | --command\n");
    return 2;
  }
  spdlog::set_level(spdlog::level::warn);
  store::RedisOptions options;
  options.address.port = static_cast<std::uint16_t>(std::atoi(argv[1]));
  options.timeout_ms = 5000;
  options.batch = static_cast<std::size_t>(std::atoi(argv[5]));
  const int depth = std::atoi(argv[2]);
  boost::asio::io_context io;
  store::RedisHealth health;
  store::RedisStore redis(io, options, health);
  Driver driver;
  driver.store = &redis;
  driver.limit = &limit;
  driver.left = std::atol(argv[3]);
  for (int i = 0; i < std::atoi(argv[4]); ++i) {
    char number[16];
    std::snprintf(number, sizeof number, "%012d", i);
    driver.keys.push_back(Key(number));
  }
  const long total = driver.left;
  // Warm up: connect and load the scripts.
  while (health.connections_up.load() == 0) io.run_one();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < depth; ++i) driver.Next();
  while (driver.completed < total) io.run_one();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (driver.failed > 0) std::fprintf(stderr, "%ld decisions failed\n", driver.failed);
  std::printf("%.0f\n", static_cast<double>(total) / seconds);
  std::fprintf(stderr, "%llu of %ld decisions joined another's script call\n",
               static_cast<unsigned long long>(health.coalesced.load()), total);
  return driver.failed > 0 ? 1 : 0;
}
