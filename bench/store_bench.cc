// ns per decision for each algorithm through LocalStore: one hot key, and
// 1M distinct keys; 1 and 2 threads. `bytes_per_key` is measured separately
// (RSS growth / keys) by the BytesPerKey benchmark.
#include <benchmark/benchmark.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "algorithms/limit.h"
#include "store/local_store.h"

namespace tollgate {
namespace {

using algorithms::Algorithm;
using algorithms::LimitParams;

constexpr std::int64_t kKeys = 1'000'000;

store::LimitSpec SpecFor(Algorithm a) {
  LimitParams p;
  p.algorithm = a;
  p.limit = 100;
  p.window_ms = 60'000;
  p.burst = a == Algorithm::kTokenBucket ? 100 : 20;
  p.sub_windows = 10;
  p.shaping = algorithms::Shaping::kNoDelay;
  return store::LimitSpec::Make({p});
}

// 1M 16-byte keys (the memory goal assumes 16-byte keys), laid out
// back to back: a gateway builds each key in a buffer it just wrote, so
// reaching the key should not cost the benchmark a cache miss of its own.
class Keys {
 public:
  explicit Keys(std::int64_t n) : bytes_(static_cast<std::size_t>(n) * kLen) {
    char buf[32];
    for (std::int64_t i = 0; i < n; ++i) {
      std::snprintf(buf, sizeof(buf), "ip:%012lld", static_cast<long long>(i));
      std::memcpy(bytes_.data() + static_cast<std::size_t>(i) * kLen, buf, kLen);
    }
  }
  std::size_t size() const { return bytes_.size() / kLen; }
  std::string_view operator[](std::size_t i) const { return {bytes_.data() + i * kLen, kLen}; }

 private:
  static constexpr std::size_t kLen = 16;
  std::vector<char> bytes_;
};

store::LocalStore* shared_store = nullptr;

const Keys& AllKeys() {
  static const Keys keys(kKeys);
  return keys;
}

void HotKey(benchmark::State& state) {
  const Algorithm a = static_cast<Algorithm>(state.range(0));
  const store::LimitSpec spec = SpecFor(a);
  if (state.thread_index() == 0) shared_store = new store::LocalStore();
  // Each thread has its own hot key: "2 threads on distinct keys".
  const std::string key = "hot-key-" + std::to_string(state.thread_index()) + "-pad";
  std::int64_t now = 1'000'000;
  for (auto _ : state) {
    // The clock advances 1 ms every 64 decisions: a realistic mix of
    // allowed and limited decisions on a busy key.
    benchmark::DoNotOptimize(
        shared_store->DecideNow({key, &spec, 1, now + (state.iterations() >> 6)}));
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(std::string(algorithms::AlgorithmName(a)));
  if (state.thread_index() == 0) {
    delete shared_store;
    shared_store = nullptr;
  }
}

void ManyKeys(benchmark::State& state) {
  const Algorithm a = static_cast<Algorithm>(state.range(0));
  const store::LimitSpec spec = SpecFor(a);
  const Keys& keys = AllKeys();
  if (state.thread_index() == 0) {
    store::LocalStoreOptions options;
    options.max_keys = 2 * kKeys;
    shared_store = new store::LocalStore(options);
    // Every key exists before the clock starts: the figure is the steady
    // state of a store holding 1M keys, not the first-touch cost of malloc
    // and page faults (a short repetition would be mostly inserts).
    for (std::size_t k = 0; k < keys.size(); ++k)
      shared_store->DecideNow({keys[k], &spec, 1, 1'000'000});
  }
  std::size_t i = static_cast<std::size_t>(state.thread_index()) * 7919;
  for (auto _ : state) {
    i = (i + 104729) % keys.size();
    benchmark::DoNotOptimize(shared_store->DecideNow({keys[i], &spec, 1, 1'000'000}));
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(std::string(algorithms::AlgorithmName(a)));
  if (state.thread_index() == 0) {
    delete shared_store;
    shared_store = nullptr;
  }
}

std::int64_t ResidentBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return 0;
}

// All-in memory per key at 1M keys: state + key + index + allocator
// overhead, as RSS growth in a fresh child process (memory freed by earlier
// benchmarks would otherwise be reused and hide the cost).
void BytesPerKey(benchmark::State& state) {
  const Algorithm a = static_cast<Algorithm>(state.range(0));
  const store::LimitSpec spec = SpecFor(a);
  const Keys& keys = AllKeys();
  double per_key = 0;
  for (auto _ : state) {
    int fds[2];
    if (pipe(fds) != 0) state.SkipWithError("pipe");
    const pid_t child = fork();
    if (child == 0) {
      store::LocalStoreOptions options;
      options.max_keys = 2 * kKeys;
      const std::int64_t before = ResidentBytes();
      store::LocalStore store(options);
      for (std::size_t i = 0; i < keys.size(); ++i) store.DecideNow({keys[i], &spec, 1, 1'000'000});
      const double measured =
          static_cast<double>(ResidentBytes() - before) / static_cast<double>(kKeys);
      (void)!write(fds[1], &measured, sizeof(measured));
      _exit(0);
    }
    (void)!read(fds[0], &per_key, sizeof(per_key));
    waitpid(child, nullptr, 0);
    close(fds[0]);
    close(fds[1]);
  }
  state.counters["bytes_per_key"] = per_key;
  state.SetLabel(std::string(algorithms::AlgorithmName(a)));
}

void AllAlgorithms(benchmark::internal::Benchmark* b) {
  for (int a = 0; a < algorithms::kAlgorithmCount; ++a) b->Arg(a);
}

// BytesPerKey first (bench/store.sh runs it in a process of its own): its
// children must not inherit memory that earlier benchmarks freed (it would be
// reused and hide the cost).
BENCHMARK(BytesPerKey)->Apply(AllAlgorithms)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(HotKey)->Apply(AllAlgorithms)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(ManyKeys)->Apply(AllAlgorithms)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace tollgate

// glibc takes and releases a mutex without atomic instructions while a
// process has only ever had one thread. The gateway always runs several, so
// a thread is started first: otherwise the single-thread figures would leave
// out the cost of the shard lock, and every 2-thread figure would be
// compared with a cheaper lock than its own.
int main(int argc, char** argv) {
  std::thread([] {}).join();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
