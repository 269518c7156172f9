#!/usr/bin/env bash
# Adaptive concurrency against an upstream that slows as it fills (the echo
# upstream's /_test/knee/10?capacity=8: eight workers of 10 ms, 800
# requests a second at best; beyond eight in flight every request's service
# time stretches):
#  1. open-loop load above its capacity (bench/open_load.py: RATE requests a
#     second whatever the answers, a 1 s client deadline) through tollgate
#     with concurrency = "adaptive", with fixed limits around the knee (8,
#     12, 16: the best of them is the one with the most goodput, found
#     here because we can try them) and with a too-high fixed limit (1000);
#     beyond the limit tollgate answers 503 at once. Goodput (2xx answered
#     within the deadline, per second) and their p50/p99 (goal: adaptive
#     within 10% of the best fixed limit's goodput, p99 at most 1.2× its
#     p99, without tuning);
#  2. the cost on the unsaturated path: wrk against the echo's plain path
#     through tollgate with concurrency = "adaptive" (its minimum above the
#     clients' concurrency: every exchange a sample, none refused), with a
#     fixed concurrency as high, and without any concurrency, alternating
#     rounds (goal: adaptive within 2% of none); and, since a shared 2-core
#     machine moves req/s by more than that, the user-space instructions
#     per request of the same three under callgrind (h2c clients, lib.sh's
#     h2load_instructions: deterministic).
# Usage: bench/adaptive.sh [rounds] (RATE: offered requests a second, 1200)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rounds=${1:-3}
rate=${RATE:-1200}
knee_path="/_test/knee/10?capacity=8"
load_seconds=${LOAD_SECONDS:-10}
warmup_seconds=${WARMUP_SECONDS:-5}

echo_port=$(free_port); start_echo "$echo_port"
declare -A port options
options[adaptive]='concurrency = "adaptive"
adaptive = { initial = 4 }'
fixed_limits="8 12 16"
for n in $fixed_limits; do options[fixed_$n]="concurrency = $n"; done
options[fixed_high]='concurrency = 1000'
# For the unsaturated path: adaptive, with a minimum above the concurrency
# of wrk and h2load, so that every exchange is a sample and none is refused.
options[adaptive_unsaturated]='concurrency = "adaptive"
adaptive = { min = 1000 }'
options[fixed_unsaturated]='concurrency = 1000'
options[none]=''
declare -A pid
for t in adaptive $(printf 'fixed_%s ' $fixed_limits) fixed_high adaptive_unsaturated fixed_unsaturated none; do
  port[$t]=$(free_port)
  TOLLGATE_UPSTREAM_OPTIONS=${options[$t]} start_tollgate "${port[$t]}" "$echo_port"
  pid[$t]=${PIDS[-1]}
done
admin_of() {  # target: its admin port, from its configuration
  awk '/^\[admin\]/ { a = 1 } a && /^address/ { gsub(/.*:|"/, ""); print; exit }' \
    "$WORK/tollgate-${port[$1]}.toml"
}
limit_of() {  # target: its tollgate_upstream_concurrency_limit
  curl -s "http://127.0.0.1:$(admin_of "$1")/metrics" |
    awk '/^tollgate_upstream_concurrency_limit\{upstream="api"\}/ { print $2 }'
}

# 1. Open-loop load through each, alternating the order every round.
targets="adaptive $(printf 'fixed_%s ' $fixed_limits)fixed_high"
for t in $targets; do : > "$WORK/$t"; done
: > "$WORK/adaptive_limits"
for round in $(seq "$rounds"); do
  order=$targets
  if [ $((round % 2)) -eq 0 ]; then order=$(echo "$targets" | tr ' ' '\n' | tac | tr '\n' ' '); fi
  for t in $order; do
    result=$(/usr/bin/python3 "$BENCH_ROOT/bench/open_load.py" "${port[$t]}" "$knee_path" "$rate" \
             --seconds "$load_seconds" --warmup "$warmup_seconds" --timeout 1)
    echo "round $round $t: $result (goodput p50_ms p99_ms refused timeouts sent)" >&2
    echo "$result" >> "$WORK/$t"
    if [ "$t" = adaptive ]; then limit_of adaptive >> "$WORK/adaptive_limits"; fi
    # Requests the client gave up on may still be at the upstream.
    sleep 3
  done
done

# The best fixed limit: the most goodput (medians).
best=""
for n in $fixed_limits; do
  if [ -z "$best" ] || awk -v a="$(col "fixed_$n" 1)" -v b="$(col "fixed_$best" 1)" 'BEGIN { exit !(a > b) }'; then
    best=$n
  fi
done

# 2. The unsaturated path.
BENCH_PATH=/ run_rounds 5 adaptive_unsaturated fixed_unsaturated none
declare -A ir
for t in adaptive_unsaturated fixed_unsaturated none; do
  port[cg_$t]=$(free_port)
  TOLLGATE_UPSTREAM_OPTIONS=${options[$t]} TOLLGATE_WRAP=$(callgrind_wrap "$t") \
    start_tollgate "${port[cg_$t]}" "$echo_port"
  result=$(h2load_instructions "$t" "${PIDS[-1]}" "http://127.0.0.1:${port[cg_$t]}/")
  echo "$t under callgrind: $result (instructions/request requests succeeded)" >&2
  ir[$t]=${result%% *}
done

report=$WORK/report.md
{
  echo "## Adaptive concurrency (bench/adaptive.sh)"
  echo
  echo "\`bench/adaptive.sh $rounds\` on $(nproc) cores ($(uname -r)), $(date -u +%Y-%m-%d); one tollgate worker each, in front of one echo upstream (\`$knee_path\`: 8 workers of 10 ms, 800 requests/s at best)."
  echo
  echo "Open-loop load of $rate requests/s for ${load_seconds} s after ${warmup_seconds} s of warm-up, 1 s client deadline (\`bench/open_load.py\`), $rounds alternating rounds, medians. Beyond its limit tollgate answers 503 at once."
  echo
  echo "| upstream concurrency | goodput (2xx/s) | p50 ms | p99 ms | 503s | timeouts |"
  echo "|---|---:|---:|---:|---:|---:|"
  echo "| \`\"adaptive\"\` (initial 4, no tuning) | $(col adaptive 1) | $(col adaptive 2) | $(col adaptive 3) | $(col adaptive 4) | $(col adaptive 5) |"
  for n in $fixed_limits; do
    echo "| $n$([ "$n" = "$best" ] && echo " (the best fixed limit)") | $(col "fixed_$n" 1) | $(col "fixed_$n" 2) | $(col "fixed_$n" 3) | $(col "fixed_$n" 4) | $(col "fixed_$n" 5) |"
  done
  echo "| 1000 (too high) | $(col fixed_high 1) | $(col fixed_high 2) | $(col fixed_high 3) | $(col fixed_high 4) | $(col fixed_high 5) |"
  echo
  echo "Adaptive ÷ the best fixed limit ($best): goodput $(ratio "$(col adaptive 1)" "$(col "fixed_$best" 1)")× (goal ≥ 0.90×), p99 $(ratio "$(col adaptive 3)" "$(col "fixed_$best" 3)")× (goal ≤ 1.2×). The adaptive limit at the end of each run: $(tr '\n' ' ' < "$WORK/adaptive_limits")."
  echo
  echo "Unsaturated path (wrk -t${WRK_THREADS:-1} -c${WRK_CONNECTIONS:-64} -d${WRK_DURATION:-5s} on \`/\`, 5 alternating rounds, medians):"
  echo
  echo "| upstream concurrency | req/s | p50 ms | p99 ms | CPU µs per request |"
  echo "|---|---:|---:|---:|---:|"
  echo "| \`\"adaptive\"\` (min 1000) | $(col adaptive_unsaturated 1) | $(col adaptive_unsaturated 2) | $(col adaptive_unsaturated 3) | $(col adaptive_unsaturated 6) |"
  echo "| 1000 | $(col fixed_unsaturated 1) | $(col fixed_unsaturated 2) | $(col fixed_unsaturated 3) | $(col fixed_unsaturated 6) |"
  echo "| none | $(col none 1) | $(col none 2) | $(col none 3) | $(col none 6) |"
  echo
  echo "Adaptive ÷ none, req/s: $(round_ratios none adaptive_unsaturated 1 higher) (goal: within 2%); CPU per request (tollgate's utime + stime over each run, /proc/PID/stat): $(round_ratios none adaptive_unsaturated 6 lower)."
  echo
  echo "User-space instructions per request under callgrind (h2load -c16 -m32 -t1, ${H2LOAD_CG_REQUESTS:-20000} requests after $((${H2LOAD_CG_REQUESTS:-20000} / 4)) to warm up, h2c clients; deterministic, kernel excluded): adaptive ${ir[adaptive_unsaturated]}, fixed 1000 ${ir[fixed_unsaturated]}, none ${ir[none]}; adaptive ÷ none $(awk -v a="${ir[adaptive_unsaturated]}" -v b="${ir[none]}" 'BEGIN { printf "%.3f", a / b }')×, adaptive ÷ fixed $(awk -v a="${ir[adaptive_unsaturated]}" -v b="${ir[fixed_unsaturated]}" 'BEGIN { printf "%.3f", a / b }')×."
} > "$report"
cat "$report"
write_results adaptive "$report"
