#!/usr/bin/env bash
# 30 configuration reloads (SIGHUP, one per second) under a steady wrk load:
# every request must succeed (no socket errors, no non-2xx answers).
# Usage: bench/reload.sh [reloads]
set -euo pipefail
source "$(dirname "$0")/lib.sh"
reloads=${1:-30}

echo_port=$(free_port); start_echo "$echo_port"
port=$(free_port)
rule='[[rules]]
name = "per-ip"
key = "ip"
algorithm = "token_bucket"
limit = 10000000
window = "1s"
burst = 10000000'
TOLLGATE_LOG_LEVEL=info start_tollgate "$port" "$echo_port" "$rule"
pid=${PIDS[-1]}
config=$WORK/tollgate-$port.toml

wrk -t1 -c32 -d"$((reloads + 2))s" "http://127.0.0.1:$port/api/hello" > "$WORK/wrk.txt" &
wrk_pid=$!
sleep 1
for i in $(seq "$reloads"); do
  # Alternate between two limits so that each reload really changes a rule.
  if [ $((i % 2)) -eq 0 ]; then sed -i 's/^limit = .*/limit = 10000000/' "$config"; else sed -i 's/^limit = .*/limit = 20000000/' "$config"; fi
  kill -HUP "$pid"
  sleep 1
done
wait "$wrk_pid"
applied=$(grep -c "is in force" "$WORK/tollgate-$port.err" || true)
requests=$(awk '/requests in/ { print $1 }' "$WORK/wrk.txt")
errors=$(awk '/Socket errors/ { gsub(/,/, ""); print $4 + $6 + $8 + $10 }' "$WORK/wrk.txt")
non2xx=$(awk '/Non-2xx/ { print $5 }' "$WORK/wrk.txt")
report=$WORK/report.md
{
  echo "## Reloads under load (bench/reload.sh)"
  echo
  echo "\`bench/reload.sh $reloads\` on $(nproc) cores, $(date -u +%Y-%m-%d): wrk -t1 -c32 for $((reloads + 2)) s against tollgate (1 thread, one token-bucket rule) while the rule's limit changes and SIGHUP is sent once a second."
  echo
  echo "reloads sent: $reloads, applied: $applied; requests: $requests; socket errors: ${errors:-0}; non-2xx: ${non2xx:-0} (goal: 0 failed)."
} > "$report"
cat "$report"
write_results reload "$report"
