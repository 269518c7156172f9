#include "gateway/tools/replay_upstream.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <charconv>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <queue>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gateway/core/adaptive_upstream.h"
#include "gateway/core/fair_queue.h"
#include "gateway/tools/replay.h"
#include "rules/config.h"
#include "rules/duration.h"

namespace tollgate::gateway {
namespace {

struct Arrival {
  std::int64_t t_ms;
  std::uint32_t flow;  // index into the trace's flows
};

// One policy's run over the whole trace: a discrete-event simulation on
// the trace's clock. Completions are kept in a min-heap; waiters in a
// FairQueue (first come, first served: every waiter in one flow) and, for
// their deadlines, in a map by time.
class Simulation {
 public:
  Simulation(const UpstreamReplayOptions& options, std::optional<std::int64_t> fixed, bool adaptive,
             bool fair, std::size_t flows)
      : options_(options),
        fixed_(fixed),
        fair_(fair),
        queue_({.max_per_flow = std::numeric_limits<std::size_t>::max(),
                .max_total = static_cast<std::size_t>(options.max_waiting)}),
        latencies_(flows) {
    if (adaptive) adaptive_.emplace(options.adaptive);
  }

  void Run(const std::vector<Arrival>& arrivals) {
    waiters_.resize(arrivals.size());
    for (std::size_t i = 0; i < arrivals.size(); ++i) {
      AdvanceTo(arrivals[i].t_ms);
      Arrive(arrivals[i], waiters_[i]);
    }
    AdvanceTo(std::numeric_limits<std::int64_t>::max());
  }

  // `start_ms`: the first arrival; goodput is over the time to the last
  // answer.
  PolicyResult Result(std::int64_t start_ms, const std::vector<std::int64_t>& sent) const {
    const std::int64_t span_ms = last_answer_ms_ - start_ms;
    PolicyResult r;
    r.served = served_;
    r.refused = refused_;
    r.failed = failed_;
    r.goodput = static_cast<double>(served_) * 1000.0 /
                static_cast<double>(std::max<std::int64_t>(1, span_ms));
    std::vector<std::int64_t> all;
    std::vector<std::int64_t> light;
    std::vector<std::int64_t> counts = sent;
    std::nth_element(counts.begin(),
                     counts.begin() + static_cast<std::ptrdiff_t>(counts.size() / 2), counts.end());
    const std::int64_t median = counts.empty() ? 0 : counts[counts.size() / 2];
    for (std::size_t f = 0; f < latencies_.size(); ++f) {
      all.insert(all.end(), latencies_[f].begin(), latencies_[f].end());
      if (sent[f] <= median) light.insert(light.end(), latencies_[f].begin(), latencies_[f].end());
    }
    r.p50_ms = Percentile(all, 0.5);
    r.p99_ms = Percentile(all, 0.99);
    r.light_p99_ms = Percentile(light, 0.99);
    r.final_limit = adaptive_ ? adaptive_->limit() : fixed_.value_or(0);
    return r;
  }

 private:
  struct Waiter : FairQueue::Waiter {
    std::int64_t arrived_ms = 0;
    std::uint32_t flow_index = 0;
    std::multimap<std::int64_t, Waiter*>::iterator deadline;
  };
  struct Completion {
    std::int64_t at_ms;
    std::int64_t arrived_ms;
    std::int64_t service_ms;
    std::int64_t inflight;  // at its start, itself included
    std::uint32_t flow_index;
    bool late;  // cut at timeout_ms: failed, a drop
    bool operator>(const Completion& o) const { return at_ms > o.at_ms; }
  };

  static std::int64_t Percentile(std::vector<std::int64_t>& v, double q) {
    if (v.empty()) return 0;
    const auto at = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1));
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(at), v.end());
    return v[at];
  }

  std::int64_t Limit() const {
    if (adaptive_) return adaptive_->limit();
    return fixed_.value_or(std::numeric_limits<std::int64_t>::max());
  }

  // Every completion and expired wait up to `t`, in time order.
  void AdvanceTo(std::int64_t t) {
    for (;;) {
      const std::int64_t done = completions_.empty() ? kNever : completions_.top().at_ms;
      const std::int64_t expiry = deadlines_.empty() ? kNever : deadlines_.begin()->first;
      const std::int64_t next = std::min(done, expiry);
      if (next > t || next == kNever) return;
      if (expiry < done) {
        Waiter* w = deadlines_.begin()->second;
        deadlines_.erase(deadlines_.begin());
        queue_.Remove(*w);
        ++refused_;
        continue;
      }
      const Completion c = completions_.top();
      completions_.pop();
      --inflight_;
      last_answer_ms_ = c.at_ms;
      if (c.late) {
        ++failed_;
      } else {
        ++served_;
        latencies_[c.flow_index].push_back(c.at_ms - c.arrived_ms);
      }
      if (adaptive_) {
        adaptive_->Record(c.service_ms * 1000, c.inflight,
                          c.late ? SampleOutcome::kDropped : SampleOutcome::kAnswered, c.at_ms);
      }
      Dispatch(c.at_ms);
    }
  }

  void Arrive(const Arrival& a, Waiter& w) {
    if (inflight_ < Limit() && queue_.size() == 0) {
      Start(a.t_ms, a.t_ms, a.flow);
      return;
    }
    if (options_.max_delay_ms <= 0) {
      ++refused_;
      return;
    }
    w.flow = fair_ ? a.flow + 1 : 0;
    w.arrived_ms = a.t_ms;
    w.flow_index = a.flow;
    FairQueue::Waiter* shed = nullptr;
    if (queue_.Push(w, shed) != FairQueue::Pushed::kQueued) {
      ++refused_;
      return;
    }
    w.deadline = deadlines_.emplace(a.t_ms + options_.max_delay_ms, &w);
  }

  void Dispatch(std::int64_t now) {
    while (inflight_ < Limit()) {
      auto* w = static_cast<Waiter*>(queue_.Pop());
      if (w == nullptr) return;
      deadlines_.erase(w->deadline);
      Start(now, w->arrived_ms, w->flow_index);
    }
  }

  void Start(std::int64_t now, std::int64_t arrived, std::uint32_t flow) {
    const std::int64_t k = ++inflight_;
    const UpstreamModel& m = options_.upstream;
    const std::int64_t service = m.service_ms * std::max(k, m.capacity) / m.capacity;
    // An upstream slower than the timeout is cut there, as the gateway
    // cuts it (504), and its place freed.
    const bool late = service > options_.timeout_ms;
    completions_.push(
        {now + (late ? options_.timeout_ms : service), arrived, service, k, flow, late});
  }

  static constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();
  const UpstreamReplayOptions& options_;
  const std::optional<std::int64_t> fixed_;
  const bool fair_;
  std::optional<AdaptiveLimit> adaptive_;
  FairQueue queue_;
  std::deque<Waiter> waiters_;
  std::multimap<std::int64_t, Waiter*> deadlines_;
  std::priority_queue<Completion, std::vector<Completion>, std::greater<>> completions_;
  std::vector<std::vector<std::int64_t>> latencies_;  // served requests' latency, by flow
  std::int64_t inflight_ = 0;
  std::int64_t last_answer_ms_ = 0;
  std::int64_t served_ = 0, refused_ = 0, failed_ = 0;
};

}  // namespace

std::vector<PolicyResult> SimulateUpstream(const UpstreamReplayOptions& options,
                                           const std::vector<std::int64_t>& times,
                                           const std::vector<std::uint32_t>& flows) {
  std::vector<Arrival> arrivals(times.size());
  std::uint32_t flow_count = 0;
  for (std::size_t i = 0; i < times.size(); ++i) {
    arrivals[i] = {times[i], flows[i]};
    flow_count = std::max(flow_count, flows[i] + 1);
  }
  std::vector<std::int64_t> sent(flow_count);
  for (const std::uint32_t f : flows) ++sent[f];
  const std::int64_t start = times.empty() ? 0 : times.front();
  std::vector<PolicyResult> results;
  auto run = [&](std::optional<std::int64_t> fixed, bool adaptive, bool fair, std::string limit,
                 std::string order) {
    Simulation sim(options, fixed, adaptive, fair, flow_count);
    sim.Run(arrivals);
    PolicyResult r = sim.Result(start, sent);
    r.limit = std::move(limit);
    r.order = std::move(order);
    results.push_back(std::move(r));
  };
  run(std::nullopt, false, false, "none", "-");
  for (const bool fair : {false, true}) {
    const char* order = fair ? "fair" : "first come";
    if (options.concurrency) {
      run(options.concurrency, false, fair, fmt::format("fixed {}", *options.concurrency), order);
    }
    run(std::nullopt, true, fair, "adaptive", order);
  }
  return results;
}

int RunUpstreamReplay(const UpstreamReplayOptions& options, std::istream& in, std::ostream& out,
                      std::ostream& err) {
  ReplayOptions trace_options;
  trace_options.input_name = options.input_name;
  TraceReader reader(in, trace_options);
  std::vector<std::int64_t> times;
  std::vector<std::uint32_t> flows;
  std::unordered_map<std::string, std::uint32_t> flow_of;
  TraceLine row;
  std::string error;
  for (;;) {
    const TraceReader::Next next = reader.Read(row, error);
    if (next == TraceReader::Next::kEnd) break;
    if (next == TraceReader::Next::kError) {
      fmt::print(err, "{}:{}: {}\n", options.input_name, reader.line(), error);
      return 1;
    }
    const auto it =
        flow_of.try_emplace(std::string(row.key), static_cast<std::uint32_t>(flow_of.size())).first;
    times.push_back(row.t_ms);
    flows.push_back(it->second);
  }
  fmt::print(out,
             "limit,order,served,refused,failed,goodput_per_s,p50_ms,p99_ms,light_p99_ms,"
             "final_limit\n");
  for (const PolicyResult& r : SimulateUpstream(options, times, flows)) {
    fmt::print(out, "{},{},{},{},{},{:.1f},{},{},{},{}\n", r.limit, r.order, r.served, r.refused,
               r.failed, r.goodput, r.p50_ms, r.p99_ms, r.light_p99_ms, r.final_limit);
  }
  out.flush();
  fmt::print(err, "{} requests of {} flows; upstream: {} at once, {} ms each\n", times.size(),
             flow_of.size(), options.upstream.capacity, options.upstream.service_ms);
  return 0;
}

namespace {

// The numeric flags of --upstream-model: how each is read, whether it is
// the gateway's side (which --config/--upstream give instead), and what it
// sets.
enum class Reads : std::uint8_t { kCount, kDuration };
enum class Side : std::uint8_t { kUpstream, kGateway };
struct NumericFlag {
  std::string_view name;
  Reads reads;
  Side side;
  void (*set)(UpstreamReplayOptions&, std::int64_t);
};
constexpr NumericFlag kNumericFlags[] = {
    {"--capacity", Reads::kCount, Side::kUpstream,
     [](UpstreamReplayOptions& o, std::int64_t n) { o.upstream.capacity = n; }},
    {"--service-time", Reads::kDuration, Side::kUpstream,
     [](UpstreamReplayOptions& o, std::int64_t n) { o.upstream.service_ms = n; }},
    {"--concurrency", Reads::kCount, Side::kGateway,
     [](UpstreamReplayOptions& o, std::int64_t n) { o.concurrency = n; }},
    {"--max-delay", Reads::kDuration, Side::kGateway,
     [](UpstreamReplayOptions& o, std::int64_t n) { o.max_delay_ms = n; }},
    {"--max-waiting", Reads::kCount, Side::kGateway,
     [](UpstreamReplayOptions& o, std::int64_t n) { o.max_waiting = n; }},
    {"--timeout", Reads::kDuration, Side::kGateway,
     [](UpstreamReplayOptions& o, std::int64_t n) { o.timeout_ms = n; }},
};

}  // namespace

std::optional<UpstreamReplayOptions> ParseUpstreamReplayFlags(const std::vector<std::string>& args,
                                                              std::string& problem) {
  UpstreamReplayOptions options;
  std::optional<std::string> config_file;
  std::optional<std::string> upstream_name;
  bool gateway_flags = false;  // the gateway's side given as flags
  auto count = [&](const std::string& flag, const std::string& v,
                   std::int64_t min) -> std::optional<std::int64_t> {
    std::int64_t n = 0;
    const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || ptr != v.data() + v.size() || n < min) {
      problem = fmt::format("{} must be an integer of at least {}; got \"{}\"", flag, min, v);
      return std::nullopt;
    }
    return n;
  };
  auto duration = [&](const std::string& flag,
                      const std::string& v) -> std::optional<std::int64_t> {
    std::string why;
    auto ms = rules::ReadPositiveDurationMs(v, why);
    if (!ms) problem = fmt::format("{} {}; got \"{}\"", flag, why, v);
    return ms;
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--upstream-model") continue;
    if (i + 1 >= args.size()) {
      problem = fmt::format("{} needs a value", a);
      return std::nullopt;
    }
    const std::string& v = args[++i];
    const auto flag = std::find_if(std::begin(kNumericFlags), std::end(kNumericFlags),
                                   [&](const NumericFlag& f) { return f.name == a; });
    if (flag != std::end(kNumericFlags)) {
      const std::optional<std::int64_t> n =
          flag->reads == Reads::kCount ? count(a, v, 1) : duration(a, v);
      if (!n) return std::nullopt;
      flag->set(options, *n);
      gateway_flags |= flag->side == Side::kGateway;
    } else if (a == "--config") {
      config_file = v;
    } else if (a == "--upstream") {
      upstream_name = v;
    } else {
      problem = fmt::format("unknown option {} (with --upstream-model)", a);
      return std::nullopt;
    }
  }
  if (config_file.has_value() != upstream_name.has_value()) {
    problem = "--config and --upstream go together";
    return std::nullopt;
  }
  if (!config_file) return options;
  if (gateway_flags) {
    problem = "--config/--upstream take the gateway's side from the file: no --concurrency, ...";
    return std::nullopt;
  }
  // The configured upstream's limit, wait and adaptive parameters.
  rules::LoadResult loaded = rules::LoadConfigFile(*config_file);
  if (!loaded.config) {
    problem = loaded.errors.empty() ? "cannot load " + *config_file : loaded.errors[0].ToString();
    return std::nullopt;
  }
  for (const rules::UpstreamConfig& u : loaded.config->upstreams) {
    if (u.name != *upstream_name) continue;
    if (u.max_connections > 0) options.concurrency = u.max_connections;
    if (u.adaptive) options.adaptive = AdaptiveParamsOf(*u.adaptive);
    options.max_delay_ms = u.max_connections_delay_ms;
    options.max_waiting = loaded.config->limits.max_waiting;
    options.timeout_ms = loaded.config->timeouts.upstream_response_ms;
    return options;
  }
  problem = fmt::format("{} has no upstream named \"{}\"", *config_file, *upstream_name);
  return std::nullopt;
}

}  // namespace tollgate::gateway
