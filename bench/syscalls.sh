#!/usr/bin/env bash
# System calls per request of nginx and tollgate, each with one worker in
# front of the echo upstream, in ratelimit.sh's two scenarios: "proxied"
# (a per-IP limit that is never reached) and "429" (per-IP 100/s, burst 10).
# Most of a proxy's CPU time here is the kernel's, so this is the other
# half of bench/instructions.sh: counts, not times. strace -c -f attaches to
# the worker after a warm-up and counts during one wrk run, whose completed
# requests divide the counts. Under strace both servers run slower, so the
# calls that depend on load (epoll_wait, one per batch of ready sockets)
# count higher than at full speed; the calls made for each request do not.
# Usage: bench/syscalls.sh [seconds]
set -euo pipefail
source "$(dirname "$0")/lib.sh"
seconds=${1:-5}

echo_port=$(free_port); start_echo "$echo_port"
declare -A port pid
for s in proxied:1000000:1000000 429:100:10; do  # scenario:rate:burst
  IFS=: read -r name rate burst <<<"$s"
  port[nginx_$name]=$(free_port)
  start_nginx "${port[nginx_$name]}" "$echo_port" "limit_req zone=ip burst=$burst nodelay;" "$(nginx_limit_zone "$rate")"
  pid[nginx_$name]=$(pgrep -P "$(cat "$WORK/nginx-${port[nginx_$name]}/nginx.pid")")  # the worker
  port[tollgate_$name]=$(free_port)
  start_tollgate "${port[tollgate_$name]}" "$echo_port" "$(token_bucket_rule "$rate" "$burst")"
  pid[tollgate_$name]=${PIDS[-1]}
done

# counts[T]: "call calls_per_request" lines of target T, busiest first.
declare -A counts
for t in nginx_proxied tollgate_proxied nginx_429 tollgate_429; do
  url="http://127.0.0.1:${port[$t]}${BENCH_PATH:-/api/hello}"
  WRK_DURATION=2s run_wrk "$url" >/dev/null
  strace -c -f -p "${pid[$t]}" -o "$WORK/$t.strace" 2>/dev/null &
  tracer=$!
  sleep 0.5  # attached to every thread
  requests=$(WRK_DURATION=${seconds}s run_wrk "$url" | awk '{ print $5 }')
  kill -INT "$tracer"; wait "$tracer" || true
  # strace -c rows: % time, seconds, usecs/call, calls, [errors,] syscall.
  counts[$t]=$(awk -v n="$requests" '
    $NF == "total" || $1 ~ /^-/ || $1 == "%" { next }
    NF >= 5 { printf "%s %.3f\n", $NF, $4 / n }
  ' "$WORK/$t.strace" | sort -k2 -rn)
  echo "$t: $requests requests; $(echo "${counts[$t]}" | tr '\n' ' ')" >&2
done

# The calls per request of target $1, all calls together.
total() { echo "${counts[$1]}" | awk '{ s += $2 } END { printf "%.2f", s }'; }
report=$WORK/report.md
{
  echo "## System calls per request: tollgate vs nginx (bench/syscalls.sh)"
  echo
  echo "\`bench/syscalls.sh $seconds\` on $(date -u +%Y-%m-%d): \`strace -c -f\` on the worker process during one wrk -t${WRK_THREADS:-1} -c${WRK_CONNECTIONS:-64} -d${seconds}s run (after a 2 s warm-up), calls divided by the requests wrk completed; one worker each, the servers and rules of bench/ratelimit.sh. Calls that depend on load (epoll_wait: one per batch of ready sockets) count higher under strace than at full speed."
  echo
  echo "| scenario | server | calls/request | by call |"
  echo "|---|---|---:|---|"
  for s in proxied 429; do
    for server in nginx tollgate; do
      t=${server}_$s
      echo "| $s | $server | $(total "$t") | $(echo "${counts[$t]}" | awk '$2 >= 0.005 { printf "%s%s %s", sep, $1, $2; sep = ", " }') |"
    done
  done
} > "$report"
cat "$report"
write_results syscalls "$report"
