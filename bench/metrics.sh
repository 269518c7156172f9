#!/usr/bin/env bash
# The cost of metrics on the request path: tollgate with [admin] metrics =
# true versus false, a per-IP token bucket that lets everything pass, same
# wrk load, one worker each, alternating rounds (goal: ≤ 2% difference).
# Usage: bench/metrics.sh [rounds]
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rounds=${1:-5}

echo_port=$(free_port); start_echo "$echo_port"
declare -A port
port[on]=$(free_port); TOLLGATE_METRICS=true start_tollgate "${port[on]}" "$echo_port" "$PASS_ALL_RULE"
port[off]=$(free_port); TOLLGATE_METRICS=false start_tollgate "${port[off]}" "$echo_port" "$PASS_ALL_RULE"
run_rounds "$rounds" on off
report=$WORK/report.md
{
  echo "## Cost of metrics (bench/metrics.sh)"
  echo
  echo "\`bench/metrics.sh $rounds\` on $(nproc) cores, $(date -u +%Y-%m-%d), wrk -t${WRK_THREADS:-1} -c${WRK_CONNECTIONS:-64} -d${WRK_DURATION:-5s}, $rounds alternating rounds, medians; one worker each, a per-IP token bucket that passes everything."
  echo
  echo "| metrics | req/s | p99 ms |"
  echo "|---|---:|---:|"
  echo "| on | $(col on 1) | $(col on 3) |"
  echo "| off | $(col off 1) | $(col off 3) |"
  echo
  echo "on ÷ off: $(awk -v a="$(col on 1)" -v b="$(col off 1)" 'BEGIN { printf "%.3f", a / b }')× req/s (goal: within 2%, i.e. ≥ 0.98×)."
} > "$report"
cat "$report"
write_results metrics "$report"
