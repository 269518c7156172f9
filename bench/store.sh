#!/usr/bin/env bash
# ns per decision for every algorithm (LocalStore, hot key and 1M keys, 1 and
# 2 threads) and bytes per key at 1M keys; medians of repetitions.
# Usage: bench/store.sh [repetitions]
set -euo pipefail
source "$(dirname "$0")/lib.sh"
reps=${1:-5}
csv=$WORK/store.csv
# Memory in a process of its own (its children must not inherit memory that
# other benchmarks freed); the timings with their repetitions interleaved in
# random order, so that a slow spell of the machine spreads over all of them
# instead of landing on whichever benchmark runs at that moment.
"$BUILD_DIR/bench/store_bench" --benchmark_filter=BytesPerKey --benchmark_format=csv \
  > "$csv" 2>/dev/null
"$BUILD_DIR/bench/store_bench" --benchmark_filter='HotKey|ManyKeys' \
  --benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true \
  --benchmark_enable_random_interleaving=true --benchmark_min_time=0.5 \
  --benchmark_format=csv 2>/dev/null | tail -n +2 >> "$csv"

# Rows look like: "HotKey/0/real_time/threads:1_median",iterations,real_time,cpu_time,unit,bytes/s,items/s,label,...,bytes_per_key
report=$WORK/report.md
awk -F, -v reps="$reps" -v date="$(date -u +%Y-%m-%d)" -v cores="$(nproc)" '
  NR == 1 { for (i = 1; i <= NF; i++) { h = $i; gsub(/"/, "", h); col[h] = i }; next }
  {
    name = $1; gsub(/"/, "", name)
    if (name !~ /_median$/ && name !~ /^BytesPerKey/) next
    split(name, part, "/")
    kind = part[1]; algo_index = part[2]
    label = $(col["label"]); gsub(/"/, "", label)
    algo[algo_index] = label
    if (kind == "BytesPerKey") { bytes[algo_index] = $(col["bytes_per_key"]); next }
    threads = (name ~ /threads:2/) ? 2 : 1
    ips[kind, algo_index, threads] = $(col["items_per_second"])
  }
  END {
    print "## Algorithms and LocalStore (bench/store.sh)"
    print ""
    printf "`bench/store.sh %s` on %s cores, %s: Google Benchmark, median of %s repetitions. ", reps, cores, date, reps
    print "Limit 100/min (token bucket burst 100, leaky bucket burst 20, sub_window N = 10), 16-byte keys."
    print "ns/decision = 1e9 ÷ decisions per second of one thread; scaling = decisions/s with 2 threads (each on its own keys) ÷ with 1."
    print "The 1M keys are all in the store before timing starts and are visited in an order unrelated to their allocation (every decision misses the cache). The process starts a thread before any benchmark, so that glibc takes the shard lock with atomic instructions in every run, as in the gateway."
    print ""
    print "| algorithm | hot key ns/decision | hot key 2-thread scaling | 1M keys ns/decision | 1M keys 2-thread scaling | bytes/key at 1M keys |"
    print "|---|---:|---:|---:|---:|---:|"
    for (a = 0; a < 6; a++) {
      printf "| %s | %.1f | %.2f× | %.0f | %.2f× | %.0f |\n", algo[a],
        1e9 / ips["HotKey", a, 1], ips["HotKey", a, 2] / ips["HotKey", a, 1],
        1e9 / ips["ManyKeys", a, 1], ips["ManyKeys", a, 2] / ips["ManyKeys", a, 1], bytes[a]
    }
    print ""
    print "Goals: ≤ 50 ns per hot-key decision (sliding_log ≤ 150 ns at L = 100), 2 threads ≥ 1.8× one thread, ≤ 100 bytes per key all-in. nginx `limit_req` keeps about 64–128 bytes per key."
  }
' "$csv" > "$report"
cat "$report"
write_results store "$report"
