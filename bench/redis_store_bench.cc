// Decisions per second of one RedisStore connection keeping `depth`
// decisions in flight (pipelined), on one hot key with a token bucket; and
// the exact EVALSHA command it sends, so that redis-benchmark can run the
// same script with the same pipelining (bench/redis_store.sh).
// Usage: redis_store_bench PORT DEPTH DECISIONS        -> "decisions_per_s"
//        redis_store_bench --command                   -> the EVALSHA arguments
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

struct Driver final : store::DecisionSink {
  store::Store* store = nullptr;
  const store::LimitSpec* limit = nullptr;
  long left = 0;
  long completed = 0;
  long failed = 0;
  void Next() {
    if (left-- > 0) store->Decide({"hot", limit, 1, 0}, *this);
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
    std::printf("%s\n",
                store::RedisDecisionCommand(limit, "tollgate:", "hot", 1, std::nullopt, 0).c_str());
    return 0;
  }
  if (argc != 4) {
    std::fprintf(stderr, "usage: redis_store_bench PORT DEPTH DECISIONS | --command\n");
    return 2;
  }
  spdlog::set_level(spdlog::level::warn);
  store::RedisOptions options;
  options.address.port = static_cast<std::uint16_t>(std::atoi(argv[1]));
  options.timeout_ms = 5000;
  const int depth = std::atoi(argv[2]);
  boost::asio::io_context io;
  store::RedisHealth health;
  store::RedisStore redis(io, options, health);
  Driver driver;
  driver.store = &redis;
  driver.limit = &limit;
  driver.left = std::atol(argv[3]);
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
  return driver.failed > 0 ? 1 : 0;
}
