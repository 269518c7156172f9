#include "gateway/tools/replay.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <istream>
#include <limits>
#include <map>
#include <memory>
#include <ostream>
#include <string_view>

#include "algorithms/settle.h"
#include "algorithms/validate.h"
#include "gateway/io/net.h"
#include "gateway/tools/replay_lease.h"
#include "gateway/tools/trace_line.h"
#include "store/local_store.h"
#include "store/redis_store.h"

namespace tollgate::gateway {
namespace {

struct KeyTotals {
  std::uint64_t allowed = 0;
  std::uint64_t limited = 0;
  std::int64_t units = 0;  // of the allowed rows: settled, else reserved
};

// Keeps a store's one answer.
struct Answer final : store::DecisionSink {
  store::StoreResult result;
  bool done = false;
  void OnDecision(const store::StoreResult& r) override {
    result = r;
    done = true;
  }
};

struct Row {
  std::size_t line = 0;
  std::int64_t t = 0;
  std::string key;
  std::int64_t cost = 1;
  std::int64_t settled = -1;  // -1: not settled (the reservation stays)
  Answer decision;
  Answer settle;  // when allowed and settled
};

// Rows are decided in batches: a Redis store pipelines a whole batch.
constexpr std::size_t kBatchRows = 512;

std::string_view StatusWord(store::StoreStatus status) {
  switch (status) {
    case store::StoreStatus::kOk:
      return "ok";
    case store::StoreStatus::kTimeout:
      return "timed out";
    case store::StoreStatus::kUnavailable:
      return "could not reach the store";
    case store::StoreStatus::kError:
      return "the store answered with an error";
  }
  return "failed";
}

}  // namespace

TraceReader::TraceReader(std::istream& in, const ReplayOptions& options)
    : in_(in), options_(options) {}

TraceReader::Next TraceReader::Read(TraceLine& row, std::string& error) {
  while (std::getline(in_, text_)) {
    ++line_;
    row = ParseTraceLine(text_, seen_data_, options_.default_cost, fourth_);
    if (row.kind == TraceLine::Kind::kSkip) {
      if (!seen_data_ && FourthColumnOf(text_) == FourthColumn::kSettled) {
        fourth_ = FourthColumn::kSettled;
      }
      continue;
    }
    if (row.kind == TraceLine::Kind::kError) {
      error = row.error;
      return Next::kError;
    }
    if (seen_data_ && row.t_ms < last_t_) {
      error = fmt::format("time goes backwards: {} after {}", row.t_ms, last_t_);
      return Next::kError;
    }
    if (auto problem = algorithms::ValidateCost(options_.windows, row.cost)) {
      error = *problem;
      return Next::kError;
    }
    if (row.settled >= 0 && options_.lease) {
      error = "a settled column needs an exact store: the lease fleet does not settle";
      return Next::kError;
    }
    if (row.settled >= 0) {
      for (const algorithms::LimitParams& w : options_.windows) {
        if (!algorithms::CanSettle(w.algorithm)) {
          error = fmt::format("{} cannot settle a reservation (docs/algorithms.md)",
                              algorithms::AlgorithmName(w.algorithm));
          return Next::kError;
        }
      }
    }
    const std::int64_t gateways = options_.lease ? options_.lease->gateways : 0;
    if (row.gateway >= 0 && gateways == 0) {
      error = "a gateway column needs --sync lease --gateways N";
      return Next::kError;
    }
    if (row.gateway >= gateways) {
      error = fmt::format("gateway {} is not in a fleet of {} (0 to {})", row.gateway, gateways,
                          gateways - 1);
      return Next::kError;
    }
    seen_data_ = true;
    last_t_ = row.t_ms;
    return Next::kRow;
  }
  return Next::kEnd;
}

int RunReplay(const ReplayOptions& options, std::istream& in, std::ostream& out,
              std::ostream& err) {
  if (auto problem = algorithms::ValidateWindows(options.windows)) {
    fmt::print(err, "replay: {}\n", *problem);
    return 1;
  }
  if (options.lease) return RunLeaseReplay(options, in, out, err);
  const store::LimitSpec spec = store::LimitSpec::Make(options.windows);
  asio::io_context io;
  store::RedisHealth health;
  std::unique_ptr<store::Store> store;
  if (options.redis) {
    store::RedisOptions redis;
    redis.address = *options.redis;
    redis.time = store::RedisTime::kClient;
    // The trace's clock is not Redis's: keys live at least an hour, under a
    // prefix of their own so that runs never see each other's state.
    redis.min_ttl_ms = 3'600'000;
    redis.prefix = fmt::format("tollgate:replay:{}-{}:", ::getpid(),
                               std::chrono::system_clock::now().time_since_epoch().count());
    redis.timeout_ms = 10'000;
    redis.max_pending = kBatchRows * 2;
    redis.breaker_failures = std::numeric_limits<int>::max();
    spdlog::set_level(spdlog::level::warn);  // stderr carries the summary
    bool fatal = false;
    if (auto problem = store::CheckRedis(redis, fatal)) {
      fmt::print(err, "replay: {}\n", *problem);
      return 1;
    }
    store = std::make_unique<store::RedisStore>(io, redis, health);
  } else {
    store::LocalStoreOptions store_options;
    store_options.max_keys = std::size_t{1} << 24;
    store = std::make_unique<store::LocalStore>(store_options);
  }
  std::map<std::string, KeyTotals, std::less<>> totals;
  std::vector<Row> rows;
  rows.reserve(kBatchRows);

  TraceReader reader(in, options);
  // The output's header, once the input's (if any) has been read: with a
  // settled column, each row adds what was settled and the state after it.
  bool header_written = false;
  auto header = [&] {
    if (header_written) return;
    header_written = true;
    out << "t_ms,key,cost,decision,remaining,retry_after_ms,delay_ms"
        << (reader.settles() ? ",settled,settled_remaining,settled_retry_after_ms\n" : "\n");
  };
  auto failed = [&](const Row& row, const Answer& answer) {
    if (answer.result.status == store::StoreStatus::kOk) return false;
    out.flush();
    fmt::print(err, "{}:{}: {}\n", options.input_name, row.line, StatusWord(answer.result.status));
    return true;
  };
  // Decides and prints the rows read so far; false after a store failure.
  // A settled row is the last of its batch (its settle comes before the
  // next row's decision).
  auto flush = [&]() -> bool {
    header();
    for (Row& row : rows) store->Decide({row.key, &spec, row.cost, row.t}, row.decision);
    for (Row& row : rows) {
      while (!row.decision.done) io.run_one();
    }
    for (Row& row : rows) {
      if (failed(row, row.decision)) return false;
      const algorithms::Decision& d = row.decision.result.decision;
      auto it = totals.find(row.key);
      if (it == totals.end()) it = totals.emplace(row.key, KeyTotals{}).first;
      (d.allowed ? it->second.allowed : it->second.limited) += 1;
      fmt::print(out, "{},{},{},{},{},{},{}", row.t, row.key, row.cost,
                 d.allowed ? "allowed" : "limited", d.remaining, d.retry_after_ms, d.delay_ms);
      const bool settles = d.allowed && row.settled >= 0;
      if (d.allowed) it->second.units += settles ? row.settled : row.cost;
      if (settles) {
        store->Settle({{row.key, &spec, row.cost, row.t}, row.settled, row.t}, row.settle);
        while (!row.settle.done) io.run_one();
        if (failed(row, row.settle)) return false;
        const algorithms::Decision& s = row.settle.result.decision;
        fmt::print(out, ",{},{},{}\n", row.settled, s.remaining, s.retry_after_ms);
      } else {
        out << (reader.settles() ? ",,,\n" : "\n");
      }
    }
    rows.clear();
    return true;
  };

  auto fail = [&](std::size_t line, std::string_view message) {
    if (!flush()) return 1;
    out.flush();
    fmt::print(err, "{}:{}: {}\n", options.input_name, line, message);
    return 1;
  };

  TraceLine parsed;
  std::string problem;
  for (;;) {
    const TraceReader::Next next = reader.Read(parsed, problem);
    if (next == TraceReader::Next::kEnd) break;
    if (next == TraceReader::Next::kError) return fail(reader.line(), problem);
    const std::size_t line_number = reader.line();
    const std::int64_t t = parsed.t_ms;
    const std::int64_t cost = parsed.cost;
    Row& row = rows.emplace_back();
    row.line = line_number;
    row.t = t;
    row.key = std::string(parsed.key);
    row.cost = cost;
    row.settled = parsed.settled;
    if ((rows.size() == kBatchRows || row.settled >= 0) && !flush()) return 1;
  }
  if (!flush()) return 1;
  out.flush();
  for (const auto& [key, t] : totals) {
    fmt::print(err, "{}: allowed {}, limited {}", key, t.allowed, t.limited);
    // With settles, what the allowed requests really cost.
    if (reader.settles()) fmt::print(err, ", units {}", t.units);
    fmt::print(err, "\n");
  }
  return 0;
}

}  // namespace tollgate::gateway
