#!/usr/bin/env bash
# Instructions per request of nginx and tollgate, each with one worker in
# front of the echo upstream, in ratelimit.sh's two scenarios: "proxied"
# (a per-IP limit that is never reached: every request goes upstream) and
# "429" (per-IP 100/s, burst 10: nearly every request is answered 429).
# valgrind's callgrind counts instructions, not time, so the figures do not
# move with whatever else the machine is doing; they count user space only
# (the kernel's TCP work, the same for both, is not in them). Each server
# runs under callgrind with counting off; wrk warms it up, then counting is
# on for one wrk run, whose completed requests divide the count.
# Usage: bench/instructions.sh [seconds]
set -euo pipefail
source "$(dirname "$0")/lib.sh"
seconds=${1:-5}

echo_port=$(free_port); start_echo "$echo_port"
declare -A port pid
# nginx in one process (no master), so that valgrind follows its worker.
for s in proxied:1000000:1000000 429:100:10; do  # scenario:rate:burst
  IFS=: read -r name rate burst <<<"$s"
  port[nginx_$name]=$(free_port)
  NGINX_WRAP=$(callgrind_wrap nginx_$name) NGINX_MAIN=" master_process off;" \
    start_nginx "${port[nginx_$name]}" "$echo_port" "limit_req zone=ip burst=$burst nodelay;" "$(nginx_limit_zone "$rate")"
  pid[nginx_$name]=${PIDS[-1]}
  port[tollgate_$name]=$(free_port)
  TOLLGATE_WRAP=$(callgrind_wrap tollgate_$name) start_tollgate "${port[tollgate_$name]}" "$echo_port" "$(token_bucket_rule "$rate" "$burst")"
  pid[tollgate_$name]=${PIDS[-1]}
done

declare -A per_request requests
for t in nginx_proxied tollgate_proxied nginx_429 tollgate_429; do
  url="http://127.0.0.1:${port[$t]}${BENCH_PATH:-/api/hello}"
  WRK_DURATION=2s run_wrk "$url" >/dev/null
  callgrind_control -i on "${pid[$t]}" >/dev/null 2>&1
  requests[$t]=$(WRK_DURATION=${seconds}s run_wrk "$url" | awk '{ print $5 }')
  callgrind_control -i off "${pid[$t]}" >/dev/null 2>&1
  kill "${pid[$t]}"; wait "${pid[$t]}" 2>/dev/null || true
  total=$(callgrind_total "$t")
  per_request[$t]=$((total / requests[$t]))
  echo "$t: $total instructions for ${requests[$t]} requests" >&2
done

report=$WORK/report.md
{
  echo "## Instructions per request: tollgate vs nginx (bench/instructions.sh)"
  echo
  echo "\`bench/instructions.sh $seconds\` on $(date -u +%Y-%m-%d): valgrind --tool=callgrind, user-space instructions of the whole server process per request completed by wrk -t${WRK_THREADS:-1} -c${WRK_CONNECTIONS:-64} -d${seconds}s (after a 2 s warm-up), one worker each, the servers and rules of bench/ratelimit.sh. Counts do not depend on the machine's load; the kernel's share (most of the CPU time per request) is not in them: bench/syscalls.sh counts the system calls."
  echo
  echo "| scenario | nginx instructions/request | tollgate instructions/request | tollgate ÷ nginx |"
  echo "|---|---:|---:|---:|"
  for s in proxied 429; do
    echo "| $s | ${per_request[nginx_$s]} | ${per_request[tollgate_$s]} | $(ratio "${per_request[tollgate_$s]}" "${per_request[nginx_$s]}")× |"
  done
} > "$report"
cat "$report"
write_results instructions "$report"
